/**
 * The orchestrate runners (Salt's salt/runners/state.py): `state.orchestrate` (aliases `state.orch`,
 * `state.sls`), `state.orchestrate_single`, `state.orchestrate_high`, `state.orchestrate_show_sls`. Each renders and runs on the master, in
 * its runner thread, as Salt's master minion does (`file_client: local`, the master's id):
 *
 * - the SLS mods from `file_roots[saltenv]` (sls.ts), with the master's pillar (compiled for the master's id,
 *   `pillarenv`, `pillar=` overrides merged) and a few grains of the master host in the render context;
 * - compiled by compiler.ts and run by chunk-runner.ts with the state modules of states.ts, whose minion jobs go out through the
 *   runner's LocalClient (publish over the request port with the root key, returns from the event bus), and
 *   whose runner and wheel calls are clear `runner`/`wheel` requests with the root key as the calling user, so
 *   each is a job of its own (jid, `salt/run/<jid>/new|ret`, job cache), as Salt's RunnerClient runs them.
 *
 * `state.orchestrate` answers `{data: {<master id>: <highstate return>}, outputter: "highstate", retcode}`:
 * retcode 0 when every state succeeded, else 1 (a render or compile error: the list of errors, retcode 1).
 * `orchestrate_single` and `orchestrate_high` answer `{<master id>: <highstate return>}` as Salt's do;
 * `orchestrate_show_sls` (`orch_show_sls`) answers the rendered high data without running anything.
 * Beyond Salt 3007 (whose two runners drop it): `test=True` is honoured by `orchestrate_single`/`_high` too.
 */
import os from "node:os";
import { EventClient } from "../../lib/client/event-client.js";
import { BatchPlan, batchSize, invalidBatchText, runBatch, type SubJobReturn } from "../../lib/client/batch.js";
import { isMap as isWireMap } from "../../shared/protocol/msgpack.js";
import { PillarCompiler } from "../../lib/pillar/compile.js";
import { makeSaltFuncs } from "../../lib/render/salt-funcs.js";
import { argOf, type RunnerContext, type RunnerFn } from "../context.js";
import { isMap, padFuncs, verifyHigh, type Data, type Low, type Running } from "./compiler.js";
import { callHigh, callSingle, checkResult } from "./chunk-runner.js";
import { StateTree } from "./sls.js";
import { stateRuntime, type CmdRequest, type MinionAnswer, type OrchestrateIO } from "./states.js";

/** The grains brine gives the master's own renders (Salt loads every grain module of the master host). */
function masterGrains(ctx: RunnerContext): Data {
  const host = os.hostname();
  return { id: ctx.cfg.id, host: host.split(".")[0], nodename: host, fqdn: host, kernel: os.type(), cpuarch: os.arch(), num_cpus: os.cpus().length };
}

function replyLoad(v: unknown): unknown {
  return isWireMap(v) && isWireMap(v.load) && Object.keys(v).every((k) => k === "load" || k === "enc") ? v.load : v;
}

function clearError(r: unknown): string | undefined {
  if (!isMap(r)) return `unexpected reply ${JSON.stringify(r)}`;
  if (r.error === undefined) return undefined;
  return isMap(r.error) ? `${String(r.error.name)}: ${String(r.error.message)}` : String(r.error);
}

/**
 * Salt's saltutil.cmd with `batch` (LocalClient.cmd_batch): the minions that answer a ping of the target run the
 * function in sub-jobs of the batch size (brine's BatchPlan, as `salt -b` runs); each answer is
 * `{out: "highstate", ret}` as saltutil wraps batch returns (no jid); minions that did not answer the ping are
 * left out, as Salt leaves them out. An invalid batch size is an error, the state fails with it.
 */
async function batchCmd(ctx: RunnerContext, req: CmdRequest, user: string): Promise<Record<string, MinionAnswer>> {
  const timeoutS = req.timeoutS ?? ctx.cfg.timeout;
  const up: string[] = [];
  for await (const r of ctx.client.cmdIter({ tgt: req.tgt as string | string[], tgtType: req.tgtType, fun: "test.ping", arg: [], user, timeoutS }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    if (!("missing" in r) && r.data.failed !== true) up.push(r.id);
  }
  const bnum = batchSize(req.batch!, up.length);
  if (bnum === undefined || bnum < 1) throw new Error(invalidBatchText(req.batch!));
  const arg = Object.keys(req.kwarg).length ? [...req.arg, { ...req.kwarg, __kwarg__: true }] : req.arg;
  const out: Record<string, MinionAnswer> = {};
  const plan = new BatchPlan([...up].sort(), bnum, 0, req.failhard === true, true);
  await runBatch(plan, {
    now: () => Date.now(),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    publish: async function* (minions): AsyncIterable<SubJobReturn> {
      const pub = { tgt: minions, tgtType: "list", fun: req.fun, arg, ret: req.ret, user, timeoutS, ...(Object.keys(req.pubKwargs).length ? { kwargs: { show_timeout: true, show_jid: false, delimiter: ":", ...req.pubKwargs } } : {}) };
      for await (const r of ctx.client.cmdIter(pub, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
        if ("missing" in r) yield { id: r.id, missing: true };
        else yield { id: r.id, part: { ret: r.data.return, ...("retcode" in r.data ? { retcode: r.data.retcode } : {}), ...(typeof r.data.jid === "string" ? { jid: r.data.jid } : {}) } };
      }
    },
    effect: (e) => {
      if (e.type !== "show") return;
      const ret = e.data[e.id];
      out[e.id] = { out: isMap(ret) && typeof ret.out === "string" ? ret.out : "highstate", ret };
    },
  });
  return out;
}

/** The orchestration's minion, runner and wheel calls, made as a client of this master. */
export function masterIO(ctx: RunnerContext): OrchestrateIO {
  const user = ctx.user ?? ctx.cfg.user;
  return {
    ...(ctx.fireArgs ? { fireArgs: (d: Data) => ctx.fireArgs!(d) } : {}),
    async cmd(req: CmdRequest): Promise<Record<string, MinionAnswer>> {
      if (req.batch !== undefined) return batchCmd(ctx, req, user);
      const arg = Object.keys(req.kwarg).length ? [...req.arg, { ...req.kwarg, __kwarg__: true }] : req.arg;
      const out: Record<string, MinionAnswer> = {};
      const pub = {
        tgt: req.tgt as string | string[],
        tgtType: req.tgtType,
        fun: req.fun,
        arg,
        ret: req.ret,
        user,
        ...(req.timeoutS ? { timeoutS: req.timeoutS } : {}),
        ...(Object.keys(req.pubKwargs).length ? { kwargs: { show_timeout: true, show_jid: false, delimiter: ":", ...req.pubKwargs } } : {}),
      };
      for await (const r of ctx.client.cmdIter(pub, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
        if ("missing" in r) {
          if (req.expectMinions) out[r.id] = { failed: true };
          continue;
        }
        const d = r.data;
        const a: MinionAnswer = { ret: d.return };
        if ("out" in d) a.out = d.out;
        if ("retcode" in d) a.retcode = d.retcode;
        if ("jid" in d) a.jid = d.jid;
        out[r.id] = a;
      }
      return out;
    },
    async runner(name, arg, kwarg) {
      const events = new EventClient(ctx.cfg.sock_dir);
      await events.connect();
      try {
        let jid: string | undefined;
        const early = new Map<string, Data>();
        let resolveRet: ((d: Data) => void) | undefined;
        const done = new Promise<Data>((r) => (resolveRet = r));
        events.on((e) => {
          const m = /^salt\/run\/(\d+)\/ret$/.exec(e.tag);
          if (!m || !isMap(e.data)) return;
          if (jid === m[1]) resolveRet!(e.data);
          else if (jid === undefined) early.set(m[1]!, e.data);
        });
        const rep = replyLoad(await ctx.client.clearRequest({ cmd: "runner", fun: name, kwarg: { arg, kwarg }, key: ctx.client.rootKey(), user }));
        const err = clearError(rep);
        if (err) return { fun: `runner.${name}`, return: err, success: false };
        jid = String((rep as Data).jid ?? "");
        if (early.has(jid)) return early.get(jid)!;
        return await done;
      } finally {
        events.close();
      }
    },
    async waitForEvents(seen, timeoutMs) {
      const events = new EventClient(ctx.cfg.sock_dir);
      await events.connect();
      try {
        return await new Promise<boolean>((resolve) => {
          const t = setTimeout(() => resolve(false), timeoutMs);
          events.on((e) => {
            if (seen(e.tag, e.data)) {
              clearTimeout(t);
              resolve(true);
            }
          });
        });
      } finally {
        events.close();
      }
    },
    async wheel(name, arg, kwarg) {
      const rep = replyLoad(await ctx.client.clearRequest({ cmd: "wheel", fun: name, kwarg: { arg, kwarg }, key: ctx.client.rootKey(), user }));
      const err = clearError(rep);
      if (err) return { fun: `wheel.${name}`, return: err, success: false };
      const data = (rep as Data).data;
      return isMap(data) ? data : { fun: `wheel.${name}`, return: data, success: false };
    },
  };
}

/** Salt's _get_test_value: None means the master's `test` option; anything but None/False is True. */
function testValue(ctx: RunnerContext, test: unknown): boolean {
  if (test === undefined || test === null) return ctx.cfg.test === true;
  return test !== false && test !== "False" && test !== "false";
}

function pillarArg(v: unknown): Data | undefined {
  if (v === undefined || v === null) return undefined;
  if (!isMap(v)) throw new Error("Pillar data must be formatted as a dictionary");
  return v;
}

interface RunOptions {
  saltenv: string;
  pillarenv: string | null;
  pillar: Data | undefined;
  test: boolean;
}

/** The master's pillar and the render context of its SLS files; pillar render errors as Salt answers them. */
async function renderContext(ctx: RunnerContext, o: RunOptions): Promise<{ context: Data } | { errors: string[] }> {
  const grains = masterGrains(ctx);
  const pillar = await new PillarCompiler(ctx.cfg).compile({ id: ctx.cfg.id, grains, saltenv: o.saltenv, pillarenv: o.pillarenv, ...(o.pillar ? { pillarOverride: o.pillar } : {}) });
  if (Array.isArray(pillar._errors) && pillar._errors.length) return { errors: ["Pillar failed to render with the following messages:", ...pillar._errors.map(String)] };
  const opts = ctx.cfg as unknown as Data;
  return { context: { salt: makeSaltFuncs({ renders: "an orchestration SLS", id: ctx.cfg.id, grains, pillar, opts }), pillar, grains, opts } };
}

function runtime(ctx: RunnerContext, test: boolean) {
  return stateRuntime(masterIO(ctx), { test, failhard: ctx.cfg.failhard === true });
}

/** Salt's state.sls on the master minion: render the mods, run them; the high data or the error list. */
export async function orchestrateSls(ctx: RunnerContext, mods: string[], o: RunOptions, exclude: unknown, jid?: string): Promise<Running | string[]> {
  const rc = await renderContext(ctx, o);
  if ("errors" in rc) return rc.errors;
  const { high, errors } = await new StateTree(ctx.cfg).render(o.saltenv, mods, rc);
  if (errors.length) return errors;
  if (exclude !== undefined && exclude !== null && exclude !== "") {
    const list = Array.isArray(exclude) ? exclude : String(exclude).split(",").map((s) => s.trim());
    high.__exclude__ = [...((high.__exclude__ as unknown[]) ?? []), ...list];
  }
  return callHigh(high, runtime(ctx, o.test), jid);
}

function modsOf(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String);
  if (typeof v === "number") return [String(v)];
  if (typeof v !== "string" || v === "") throw new Error("state.orchestrate needs the SLS to run (mods), e.g. salt-run state.orchestrate orch.deploy");
  return v.split(",").map((s) => s.trim()).filter(Boolean);
}

/** state.orchestrate(mods, saltenv="base", test=None, exclude=None, pillar=None, pillarenv=None, pillar_enc=None, orchestration_jid=None) */
const orchestrate: RunnerFn = async (ctx, arg, kwarg) => {
  const mods = modsOf(argOf(arg, kwarg, 0, "mods", undefined));
  const saltenvRaw = argOf(arg, kwarg, 1, "saltenv", "base");
  const pillar = pillarArg(argOf(arg, kwarg, 4, "pillar", null));
  const pillarenvRaw = argOf(arg, kwarg, 5, "pillarenv", null) ?? (ctx.cfg as unknown as Data).pillarenv ?? null;
  if (argOf(arg, kwarg, 6, "pillar_enc", null) !== null) throw new Error("pillar_enc is not supported: brine has no gpg renderer to decrypt the pillar argument");
  const o: RunOptions = {
    saltenv: saltenvRaw === null || saltenvRaw === undefined ? String((ctx.cfg as unknown as Data).saltenv ?? "base") : String(saltenvRaw),
    pillarenv: pillarenvRaw === null || pillarenvRaw === undefined ? null : String(pillarenvRaw),
    pillar,
    test: testValue(ctx, argOf(arg, kwarg, 2, "test", null)),
  };
  const jid = String(argOf(arg, kwarg, 7, "orchestration_jid", null) ?? ctx.jid ?? "") || undefined;
  const running = await orchestrateSls(ctx, mods, o, argOf(arg, kwarg, 3, "exclude", null), jid);
  const data = { [ctx.cfg.id]: running };
  return { data, outputter: "highstate", retcode: checkResult(data) ? 0 : 1 };
};

/** The keyword arguments of orchestrate_single/_high that are the runner's, not the state's. */
const RUNNER_KEYS = new Set(["test", "queue", "pillar", "saltenv", "pillarenv", "timeout"]);

/** state.orchestrate_single(fun, name, test=None, queue=False, pillar=None, **kwargs): one state function. */
const orchestrateSingle: RunnerFn = async (ctx, arg, kwarg) => {
  const fun = String(argOf(arg, kwarg, 0, "fun", ""));
  const name = argOf(arg, kwarg, 1, "name", undefined);
  const test = testValue(ctx, argOf(arg, kwarg, 2, "test", null));
  pillarArg(argOf(arg, kwarg, 4, "pillar", null));
  const dot = fun.indexOf(".");
  if (dot < 1 || name === undefined) return { [ctx.cfg.id]: "Invalid function passed" };
  const low: Low = { state: fun.slice(0, dot), fun: fun.slice(dot + 1), __id__: String(name), name };
  for (const [k, v] of Object.entries(kwarg)) if (!["fun", "name"].includes(k) && !RUNNER_KEYS.has(k)) low[k] = v;
  return { [ctx.cfg.id]: await callSingle(low, runtime(ctx, test)) };
};

/** state.orchestrate_high(data, test=None, queue=False, pillar=None, **kwargs): high data given inline. */
const orchestrateHigh: RunnerFn = async (ctx, arg, kwarg) => {
  const data = argOf(arg, kwarg, 0, "data", undefined);
  const test = testValue(ctx, argOf(arg, kwarg, 1, "test", null));
  pillarArg(argOf(arg, kwarg, 3, "pillar", null));
  if (!isMap(data)) return { [ctx.cfg.id]: ["High data is not a dictionary and is invalid"] };
  const high = structuredClone(data);
  padFuncs(high);
  return { [ctx.cfg.id]: await callHigh(high, runtime(ctx, test), ctx.jid) };
};

/** state.orchestrate_show_sls(mods, saltenv="base", test=None, queue=False, pillar=None, pillarenv=None): the rendered high data. */
const orchestrateShowSls: RunnerFn = async (ctx, arg, kwarg) => {
  const mods = modsOf(argOf(arg, kwarg, 0, "mods", undefined));
  const pillarenv = argOf(arg, kwarg, 5, "pillarenv", null) ?? ctx.cfg.pillarenv ?? null;
  const o: RunOptions = { saltenv: String(argOf(arg, kwarg, 1, "saltenv", "base") ?? "base"), pillarenv: pillarenv === null ? null : String(pillarenv), pillar: pillarArg(argOf(arg, kwarg, 4, "pillar", null)), test: false };
  const rc = await renderContext(ctx, o);
  if ("errors" in rc) throw new Error(`Pillar failed to render: ${rc.errors.slice(1).join("; ")}`);
  const { high, errors } = await new StateTree(ctx.cfg).render(o.saltenv, mods, rc);
  errors.push(...verifyHigh(high));
  return { [ctx.cfg.id]: errors.length ? errors : high };
};

export const orchestrateRunners: Record<string, RunnerFn> = {
  "state.orchestrate_show_sls": orchestrateShowSls,
  "state.orch_show_sls": orchestrateShowSls,
  "state.orchestrate": orchestrate,
  "state.orch": orchestrate,
  "state.sls": orchestrate,
  "state.orchestrate_single": orchestrateSingle,
  "state.orchestrate_high": orchestrateHigh,
};
