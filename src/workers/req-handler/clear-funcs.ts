/**
 * The clear commands besides `_auth` and `publish` (Salt's ClearFuncs: runner, wheel, mk_token,
 * get_token), what salt-api, Pepper and CI pipelines send: each is authenticated by its own credentials
 * (`token`, or `eauth` + `username` + `password`, or the CLI key), authorized by the ACL module, and
 * audited with one log line. A refusal gets Salt's answer; nothing is run.
 *
 * - runner: answered at once with `{tag: "salt/run/<jid>", jid}`; the main thread starts the runner
 *   thread (Effects.runs), which fires `salt/run/<jid>/new` and `/ret` as `salt-run` does.
 * - wheel: run here, in the request worker, and answered with `{tag, data: {fun, jid, tag, user,
 *   return, success}}` after `salt/wheel/<jid>/new` and `/ret`.
 * - mk_token / get_token: Salt's replies (`""` on a failed login; `{}` for an unknown token).
 * - rm_token (brine): revokes the token it carries (what the HTTP API's /logout sends).
 */
import { getLogger } from "../../shared/log.js";
import { isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { specAllowed, type SpecForm } from "../../lib/auth/acl.js";
import { AUTH_ERROR_NAME, credentialKind, SENSITIVE_KEYS, type AuthOutcome } from "../../lib/auth/authenticate.js";
import { callWheel } from "../../lib/wheel/index.js";
import type { Effects, MasterContext } from "./context.js";

const log = getLogger("brine.audit");

/** The clear commands this module answers. */
export const CLEAR_COMMANDS = new Set(["runner", "wheel", "mk_token", "get_token", "rm_token"]);

/** Load keys that are not a runner's or wheel function's keyword arguments (Salt's reserved low keys). */
const RESERVED = new Set(["cmd", "fun", "arg", "kwarg", "eauth", "client", "user", "tgt", "tgt_type", "__source", ...SENSITIVE_KEYS]);

export interface AuditFacts {
  user: string;
  backend: string;
  fun: string;
  target?: unknown;
  source?: string;
  verdict: string;
}

/** One line per authorization decision: user, backend, function, target, source, verdict. */
export function audit(f: AuditFacts): void {
  const line = `audit: user=${JSON.stringify(f.user)} backend=${JSON.stringify(f.backend)} fun=${JSON.stringify(f.fun)}${f.target !== undefined ? ` target=${JSON.stringify(f.target)}` : ""} source=${JSON.stringify(f.source ?? "request port")} verdict=${JSON.stringify(f.verdict)}`;
  if (f.verdict.startsWith("allowed")) log.info(line);
  else log.warning(line);
}

function text(v: unknown, max = 256): string {
  return typeof v === "string" ? v.slice(0, max) : "";
}

/** A runner's or wheel function's (arg, kwarg) from a clear load, in either shape clients send. */
export function lowArgs(load: Record<string, WireValue>): { arg: unknown[]; kwarg: Record<string, unknown> } {
  const kw = isMap(load.kwarg) ? (load.kwarg as Record<string, unknown>) : {};
  // RunnerClient/WheelClient (_reformat_low) send kwarg = {arg: [...], kwarg: {...}}
  if ((Array.isArray(kw.arg) || isMap(kw.kwarg as WireValue)) && Object.keys(kw).every((k) => k === "arg" || k === "kwarg")) {
    return { arg: Array.isArray(kw.arg) ? kw.arg : [], kwarg: isMap(kw.kwarg as WireValue) ? { ...(kw.kwarg as Record<string, unknown>) } : {} };
  }
  const kwarg: Record<string, unknown> = { ...kw };
  for (const [k, v] of Object.entries(load)) if (!RESERVED.has(k) && !k.startsWith("__")) kwarg[k] = v;
  return { arg: Array.isArray(load.arg) ? load.arg : [], kwarg };
}

function refusal(o: Extract<AuthOutcome, { ok: false }>): { error: { name: string; message: string } } {
  return { error: o.error };
}

/** Authenticates and authorizes a runner or wheel call; the refusal to send, or the effective user. */
async function authorizeSpec(ctx: MasterContext, load: Record<string, WireValue>, form: SpecForm, fun: string, args: { arg: unknown[]; kwarg: Record<string, unknown> }, source: string | undefined): Promise<{ user: string } | { refuse: unknown }> {
  const kind = credentialKind(load);
  const o = await ctx.auth().authenticate(load as Record<string, unknown>, kind, source);
  if (!o.ok) {
    audit({ user: o.username, backend: o.backend, fun: `${form}.${fun}`, source, verdict: `denied: ${o.reason}` });
    return { refuse: refusal(o) };
  }
  if (o.rights !== "full") {
    const v = specAllowed(o.rights, fun, args, form);
    if (v !== true) {
      audit({ user: o.username, backend: o.backend, fun: `${form}.${fun}`, source, verdict: v === false ? "denied: not in the user's auth list" : `denied: ${v.error.message}` });
      if (v !== false) return { refuse: v };
      return { refuse: { error: { name: AUTH_ERROR_NAME[kind], message: `Authentication failure of type "${kind}" occurred for user ${o.username}.` } } };
    }
  }
  audit({ user: o.username, backend: o.backend, fun: `${form}.${fun}`, source, verdict: "allowed" });
  return { user: o.username };
}

export async function handleClearCommand(ctx: MasterContext, cmd: string, load: Record<string, WireValue>, fx: Effects, source?: string): Promise<unknown> {
  switch (cmd) {
    case "mk_token": {
      const r = await ctx.auth().mkToken(load as Record<string, unknown>, source);
      audit({ user: r.username || "UNKNOWN", backend: text(load.eauth), fun: "mk_token", source, verdict: r.token ? "allowed" : `denied: ${r.reason}` });
      if (!r.token) {
        log.warning('Authentication failure of type "eauth" occurred.');
        return "";
      }
      return r.token;
    }
    case "get_token": {
      if (!("token" in load)) return false;
      return (await ctx.auth().tokens.get(load.token)) ?? {};
    }
    case "rm_token": {
      const removed = await ctx.auth().tokens.remove(load.token);
      audit({ user: "UNKNOWN", backend: "token", fun: "rm_token", source, verdict: removed ? "allowed: token revoked" : "denied: unknown token" });
      return removed;
    }
    case "runner":
    case "wheel": {
      const fun = load.fun;
      if (typeof fun !== "string" || fun.length === 0 || fun.length > 256) {
        return { error: { name: "SaltInvocationError", message: "A command invocation error occurred: Check syntax." } };
      }
      const args = lowArgs(load);
      const a = await authorizeSpec(ctx, load, cmd, fun, args, source);
      if ("refuse" in a) return a.refuse;
      const jid = ctx.jids.next();
      if (cmd === "runner") {
        fx.runs.push({ jid, fun, arg: args.arg, kwarg: args.kwarg, user: a.user });
        return { tag: `salt/run/${jid}`, jid };
      }
      return runWheel(ctx, fx, jid, fun, args, a.user);
    }
    default:
      return {};
  }
}

async function runWheel(ctx: MasterContext, fx: Effects, jid: string, fun: string, args: { arg: unknown[]; kwarg: Record<string, unknown> }, user: string): Promise<unknown> {
  const tag = `salt/wheel/${jid}`;
  const data: Record<string, unknown> = { fun: `wheel.${fun}`, jid, tag, user };
  ctx.fire(fx, `${tag}/new`, { ...data });
  const r = await callWheel(ctx.wheelContext(fx), fun, args.arg, args.kwarg);
  data.return = r.return;
  data.success = r.success;
  ctx.fire(fx, `${tag}/ret`, { ...data });
  return { tag, data };
}
