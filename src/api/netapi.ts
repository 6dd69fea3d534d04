/**
 * Salt's NetapiClient (salt/netapi/__init__.py) for the API thread: one lowstate chunk in, the value
 * salt-api would put in `"return"` out. Every client turns the chunk into the clear request Salt's own
 * clients send to the request port (LocalClient.pub, RunnerClient/WheelClient.master_call, Resolver's
 * mk_token/get_token), with the chunk's `token` or `eauth`/`username`/`password` in it; the master's
 * request workers authenticate and authorize. Nothing here decides who may do what: it checks shapes
 * (a clear 400 for a bad target, function or client) and maps Salt's error names to HTTP statuses.
 */
import type { MasterConfig } from "../shared/config/defaults.js";
import type { BusEvent } from "../shared/event-frame.js";
import { isMap, type WireValue } from "../shared/protocol/msgpack.js";
import { LocalClient, type PubOptions, type PubReply } from "../lib/client/local-client.js";
import { jobReturns } from "../lib/client/job-returns.js";
import type { ClearRequester } from "./master-link.js";
import type { EventFeed } from "./bus-feed.js";
import { NETAPI_CLIENTS, type ApiOptions } from "./options.js";

/**
 * An HTTP error with rest_cherrypy's status for it. Not a BrineError: it carries the HTTP status salt-api
 * answers (401, 400, 503, ...) and Salt's text, which clients read; the protocol type of the API's contract.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Salt's exception names (salt.utils.error.raise_error) → rest_cherrypy's hypermedia_handler status. */
function statusOfSaltError(name: string): number {
  if (["AuthenticationError", "AuthorizationError", "EauthAuthenticationError", "TokenAuthenticationError"].includes(name)) return 401;
  if (name === "SaltInvocationError") return 400;
  if (name === "SaltDaemonNotRunning" || name === "SaltReqTimeoutError") return 503;
  if (name === "SaltClientTimeout") return 504;
  return 500;
}

/** The `error` a master reply carries (top level, or inside a clear load), as an ApiError. */
export function replyError(reply: WireValue): ApiError | undefined {
  const pick = (v: WireValue | undefined): ApiError | undefined => {
    if (!isMap(v) || v.error === undefined || v.error === null) return undefined;
    const e = v.error;
    if (isMap(e)) {
      const name = typeof e.name === "string" ? e.name : "SaltException";
      const message = typeof e.message === "string" ? e.message : name;
      return new ApiError(statusOfSaltError(name), message);
    }
    return undefined;
  };
  // the lanes' own refusals (queue full, master stopping) are a top-level string error: try again later
  if (isMap(reply) && typeof reply.error === "string") return new ApiError(503, `Salt Master is not available: ${reply.error}`);
  return pick(reply) ?? (isMap(reply) ? pick(reply.load) : undefined);
}

// --- shape checks -----------------------------------------------------------------------------------------

const FUN_RE = /^[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+$/;
const funLengthMax = 256;
const tgtLengthMax = 16_384;
const tgtListMax = 100_000;
const TGT_TYPES = new Set(["glob", "pcre", "list", "grain", "grain_pcre", "pillar", "pillar_pcre", "pillar_exact", "compound", "compound_pillar_exact", "ipcidr", "nodegroup", "range"]);
/** control characters: never part of a target, an id or a tag */
const CONTROL_RE = /[\u0000-\u001f\u007f]/;
const RETURNER_RE = /^[A-Za-z0-9_.,-]*$/;
/** Salt's tokens are hex digests (rest_cherrypy refuses anything else with 401 "Invalid token"). */
export const TOKEN_RE = /^[0-9a-fA-F]{1,256}$/;

export function checkFun(fun: unknown): string | string[] {
  const ok = (f: unknown) => typeof f === "string" && f.length <= funLengthMax && FUN_RE.test(f);
  if (ok(fun)) return fun as string;
  if (Array.isArray(fun) && fun.length > 0 && fun.length <= 100 && fun.every(ok)) return fun as string[];
  throw new ApiError(400, `Invalid function ${JSON.stringify(fun)?.slice(0, 100) ?? "(missing)"}: expected module.function`);
}

export function checkTarget(tgt: unknown): string | string[] {
  const ok = (t: unknown) => typeof t === "string" && t.length > 0 && t.length <= tgtLengthMax && !CONTROL_RE.test(t);
  if (ok(tgt)) return tgt as string;
  if (Array.isArray(tgt) && tgt.length > 0 && tgt.length <= tgtListMax && tgt.every(ok)) return tgt as string[];
  throw new ApiError(400, "Invalid target: a non-empty string (or list of strings) without control characters is required");
}

function checkTgtType(low: Record<string, unknown>): string {
  // pepper sends the pre-2018 name `expr_form`
  const t = low.tgt_type ?? low.expr_form ?? "glob";
  if (typeof t !== "string" || !TGT_TYPES.has(t)) throw new ApiError(400, `Invalid tgt_type ${JSON.stringify(t)?.slice(0, 60)}: one of ${[...TGT_TYPES].join(", ")}`);
  return t;
}

function timeoutOf(low: Record<string, unknown>, dflt: number): number {
  const t = low.timeout;
  if (t === undefined || t === null || t === "") return dflt;
  const n = typeof t === "string" ? Number(t) : t;
  if (typeof n !== "number" || !(n > 0) || n > 86_400) throw new ApiError(400, "timeout must be a number of seconds");
  return n;
}

/** The credentials of a chunk, as Salt's clients pass them on: a token, or eauth + username + password. */
export function authOf(low: Record<string, unknown>): Record<string, unknown> {
  if (low.token !== undefined) return { token: low.token };
  const out: Record<string, unknown> = { eauth: low.eauth };
  if (low.username !== undefined) out.username = low.username;
  if (low.password !== undefined) out.password = low.password;
  return out;
}

/** Salt's condition_input: `kwarg` becomes a trailing `{__kwarg__: True, ...}` argument. */
function argsOf(low: Record<string, unknown>): unknown[] {
  const arg = low.arg === undefined || low.arg === null ? [] : Array.isArray(low.arg) ? low.arg : [low.arg];
  if (isMap(low.kwarg as WireValue) && Object.keys(low.kwarg as object).length) return [...arg, { ...(low.kwarg as object), __kwarg__: true }];
  return arg;
}

/** Publish-load kwargs salt-api's LocalClient passes on besides the credentials. */
const PUB_KWARGS = ["delimiter", "metadata", "ret_config", "ret_kwargs", "module_executors", "executor_opts", "nocache"] as const;
/** Keys of a chunk that are the client's own, never a runner or wheel function's keyword argument. */
const CHUNK_KEYS = new Set(["client", "fun", "arg", "kwarg", "token", "eauth", "username", "password", "user", "key", "timeout", "full_return", "print_event"]);

export class Netapi {
  private readonly local: LocalClient;

  constructor(
    private readonly cfg: MasterConfig,
    private readonly opts: ApiOptions,
    private readonly master: ClearRequester,
    private readonly feed: EventFeed,
  ) {
    this.local = new LocalClient(cfg);
  }

  /** NetapiClient.run: client checks, credentials present, then the client's call. */
  async run(low: Record<string, unknown>, source?: string): Promise<unknown> {
    const client = low.client;
    if (typeof client !== "string" || !(NETAPI_CLIENTS as readonly string[]).includes(client)) {
      throw new ApiError(400, `Invalid client specified: '${String(client)}' (one of: ${NETAPI_CLIENTS.join(", ")})`);
    }
    if (!this.opts.enabledClients.has(client)) {
      throw new ApiError(400, `Client disabled: '${client}'. Add to 'netapi_enable_clients' master config option to enable.`);
    }
    if (!("token" in low || "eauth" in low)) throw new ApiError(401, "No authentication credentials given");
    if (low.token !== undefined && !(typeof low.token === "string" && TOKEN_RE.test(low.token))) throw new ApiError(401, "Invalid token");
    switch (client) {
      case "local":
        return this.runLocal(low, source);
      case "local_async":
        return this.localAsync(low, source);
      case "runner":
        return this.runner(low, false, source);
      case "runner_async":
        return this.runner(low, true, source);
      case "wheel":
        return this.wheel(low, false, source);
      case "wheel_async":
        return this.wheel(low, true, source);
      default:
        throw new ApiError(501, `Client '${client}' is not implemented by brine's API (brine has no batch, subset or salt-ssh execution yet); use 'local' or 'local_async'`);
    }
  }

  /** The publish of one chunk (LocalClient.pub's load, with the chunk's credentials in `kwargs`). */
  /** `listening`: the caller waits for the job's events, so the bus feed must be open before the publish */
  private publisher(low: Record<string, unknown>, source: string | undefined, listening: boolean): (o: PubOptions) => Promise<PubReply> {
    const kwargs: Record<string, unknown> = { ...authOf(low), show_jid: false, show_timeout: true };
    for (const k of PUB_KWARGS) if (low[k] !== undefined) kwargs[k] = low[k];
    if (kwargs.delimiter === undefined) kwargs.delimiter = ":";
    return async (o) => {
      const t = this.local.resolveTarget(o.tgt, o.tgtType ?? "glob");
      if ("error" in t) throw new ApiError(400, t.error);
      const load: Record<string, unknown> = { cmd: "publish", tgt: t.tgt, fun: o.fun, arg: o.arg ?? [], tgt_type: t.tgtType, ret: o.ret ?? "", jid: o.jid ?? "", kwargs, user: this.cfg.user };
      // a master of masters passes the timeout down to its syndics (Salt's LocalClient.pub: `to`)
      if (this.opts.syndicWaitS !== undefined) load.to = o.timeoutS ?? this.opts.timeoutS;
      if (listening) await this.feed.ready();
      const reply = await this.master.request(load, source);
      // Salt's LocalClient: "" is a failed eauth; an error with a name raises that exception
      if (reply === "") throw new ApiError(401, "Failed to authenticate! This is most likely because this user is not permitted to execute commands");
      const err = replyError(reply);
      if (err) throw err;
      if (isMap(reply) && isMap(reply.load)) return reply.load as PubReply;
      throw new ApiError(500, "the master gave no publish reply");
    };
  }

  private pubOptions(low: Record<string, unknown>): PubOptions {
    return { tgt: checkTarget(low.tgt), fun: checkFun(low.fun), arg: argsOf(low), tgtType: checkTgtType(low), ret: this.returner(low) };
  }

  private returner(low: Record<string, unknown>): string {
    const r = low.ret ?? "";
    if (typeof r !== "string" || !RETURNER_RE.test(r)) throw new ApiError(400, "ret must be a returner name (or names separated by commas)");
    return r;
  }

  /** LocalClient.run_job: `{jid, minions}`, or `{}` when nothing matched (a master of masters publishes anyway: its syndics' minions may match). */
  private async localAsync(low: Record<string, unknown>, source: string | undefined): Promise<unknown> {
    const r = await this.publisher(low, source, false)(this.pubOptions(low));
    if (!r.jid || !r.minions || (r.minions.length === 0 && this.opts.syndicWaitS === undefined)) return {};
    return { jid: r.jid, minions: r.minions };
  }

  /**
   * LocalClient.cmd: each minion's `return`; a targeted minion that never returned is `false`. On a master of
   * masters (order_masters) the wait lasts at least `syndic_wait` and takes the returns of the minions below
   * the syndics; as salt-api on a Python master of masters answers (checked against it): a silent minion below
   * a syndic is left out (Salt's cmd lists only the minions the top itself matched), and the top's own matched
   * keys that never return, its syndics among them, are `false`.
   */
  private async runLocal(low: Record<string, unknown>, source: string | undefined): Promise<unknown> {
    const o = { ...this.pubOptions(low), timeoutS: timeoutOf(low, this.opts.timeoutS) };
    const out: Record<string, unknown> = {};
    const full = low.full_return === true;
    const syndicWaitMs = this.opts.syndicWaitS === undefined ? undefined : this.opts.syndicWaitS * 1000;
    for await (const r of jobReturns((fn) => this.feed.subscribe(fn), this.publisher(low, source, true), o, { timeoutMs: o.timeoutS * 1000, gatherJobTimeoutMs: this.opts.gatherJobTimeoutS * 1000, syndicWaitMs })) {
      if ("missing" in r) {
        if (r.syndic === undefined) out[r.id] = false;
      } else out[r.id] = full ? r.data : (r.data.return ?? {});
    }
    return out;
  }

  /** A clear `runner` or `wheel` request's reply, errors raised. */
  private async masterCall(load: Record<string, unknown>, source: string | undefined): Promise<Record<string, WireValue>> {
    const reply = await this.master.request(load, source);
    const err = replyError(reply);
    if (err) throw err;
    if (!isMap(reply) || Object.keys(reply).length === 0) throw new ApiError(500, `the master refused the ${String(load.cmd)} request`);
    return reply;
  }

  /**
   * RunnerClient: the load is `{fun, kwarg: {arg, kwarg}}` plus credentials (RunnerClient._reformat_low:
   * the chunk's `arg`, its `kwarg` and every other key of the chunk as a keyword argument). The sync
   * form waits for `salt/run/<jid>/ret` up to `rest_timeout` (504 after) and answers its `return`.
   */
  private async runner(low: Record<string, unknown>, async: boolean, source: string | undefined): Promise<unknown> {
    const fun = checkFun(low.fun);
    if (typeof fun !== "string") throw new ApiError(400, "a runner's fun must be one function");
    const kwarg: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(low)) if (!CHUNK_KEYS.has(k)) kwarg[k] = v;
    if (isMap(low.kwarg as WireValue)) Object.assign(kwarg, low.kwarg);
    const arg = low.arg === undefined || low.arg === null ? [] : Array.isArray(low.arg) ? low.arg : [low.arg];
    const load = { cmd: "runner", fun, kwarg: { arg, kwarg }, ...authOf(low) };
    if (async) return this.masterCall(load, source);
    const timeoutMs = timeoutOf(low, this.opts.restTimeoutS) * 1000;
    // subscribed before the request, so the return cannot pass unseen
    let want: string | undefined;
    const early: BusEvent[] = [];
    let deliver: ((e: BusEvent) => void) | undefined;
    const off = this.feed.subscribe((e) => {
      if (!e.tag.startsWith("salt/run/")) return;
      if (deliver) deliver(e);
      else early.push(e);
    });
    try {
      await this.feed.ready();
      const job = await this.masterCall(load, source);
      if (typeof job.tag !== "string") throw new ApiError(500, "the master's runner reply has no tag");
      want = `${job.tag}/ret`;
      const ret = await new Promise<BusEvent>((resolve, reject) => {
        const t = setTimeout(() => reject(new ApiError(504, `RunnerClient job '${String(job.jid)}' timed out`)), timeoutMs);
        deliver = (e) => {
          if (e.tag === want) {
            clearTimeout(t);
            resolve(e);
          }
        };
        for (const e of early.splice(0)) deliver(e);
      });
      return low.full_return === true ? ret : ret.data?.return;
    } finally {
      off();
    }
  }

  /**
   * WheelClient.master_call: the chunk itself is the load (`fun` and the function's keyword arguments
   * flat, plus credentials); the sync reply is the master's `{tag, data}`, the async one `{tag, jid}`.
   */
  private async wheel(low: Record<string, unknown>, async: boolean, source: string | undefined): Promise<unknown> {
    const fun = checkFun(low.fun);
    if (typeof fun !== "string") throw new ApiError(400, "a wheel function's fun must be one function");
    const load: Record<string, unknown> = { cmd: "wheel" };
    for (const [k, v] of Object.entries(low)) if (k !== "client" && k !== "token" && k !== "eauth" && k !== "username" && k !== "password") load[k] = v;
    Object.assign(load, { fun }, authOf(low));
    const reply = await this.masterCall(load, source);
    if (!async) return reply;
    const data = isMap(reply.data) ? reply.data : {};
    return { tag: reply.tag, jid: data.jid };
  }

  /** Resolver.mk_token over the clear channel: the token dict, or undefined for refused credentials. */
  async mkToken(creds: Record<string, unknown>, source?: string): Promise<Record<string, WireValue> | undefined> {
    const load: Record<string, unknown> = { cmd: "mk_token" };
    for (const k of ["eauth", "username", "password", "token_expire"]) if (creds[k] !== undefined) load[k] = creds[k];
    const reply = await this.master.request(load, source);
    if (isMap(reply) && typeof reply.token === "string" && reply.token !== "") return reply;
    return undefined;
  }

  /** brine's rm_token: the master revokes the token (what /logout does; rest_cherrypy only forgets its session). */
  async rmToken(token: string, source?: string): Promise<boolean> {
    if (!TOKEN_RE.test(token)) return false;
    return (await this.master.request({ cmd: "rm_token", token }, source)) === true;
  }

  /** Resolver.get_token: the token dict when the master knows the token and it has not expired. */
  async getToken(token: string, source?: string): Promise<Record<string, WireValue> | undefined> {
    if (!TOKEN_RE.test(token)) return undefined;
    const reply = await this.master.request({ cmd: "get_token", token }, source);
    if (!isMap(reply) || typeof reply.token !== "string") return undefined;
    const expire = Number(reply.expire);
    if (!(expire > Date.now() / 1000)) return undefined;
    return reply;
  }
}
