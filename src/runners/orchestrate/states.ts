/**
 * The state modules orchestration runs on the master (Salt's salt/states/saltmod.py and salt/states/test.py),
 * over an injected `OrchestrateIO` (publish-and-gather, runner and wheel calls), so they are tested without a
 * master. Returns and comments are Salt 3007's.
 *
 * - `salt.state` (tgt, tgt_type, sls | highstate | top, saltenv, pillar, pillarenv, test, exclude, ret,
 *   ret_config, ret_kwargs, expect_minions, fail_minions, allow_fail, concurrent, queue, timeout),
 *   `salt.function` (name, tgt, tgt_type, arg, kwarg, ret, ret_config, ret_kwargs, expect_minions,
 *   fail_minions, timeout), `salt.runner`, `salt.wheel`, `salt.parallel_runners`, `salt.wait_for_event` (name,
 *   id_list, event_id, timeout; the master's bus).
 * - `test.nop`, `succeed_without_changes`, `succeed_with_changes`, `fail_without_changes`, `fail_with_changes`,
 *   `configurable_test_state`, `show_notification`, and `test.mod_watch` (what `watch` calls).
 *
 * `batch` runs as Salt's cmd_batch (src/lib/client/batch.ts). What brine cannot do is a failed state naming it,
 * never a silent success: `subset`, `ssh`, `fail_function`; any other state module is "not found" with a reason (chunk-runner.ts).
 */
import { fnmatch } from "../../lib/targeting/fnmatch.js";
import { genTag, isMap, type Data, type StateCall, type StateResult, type StateRuntime } from "./compiler.js";
import { checkResult } from "./chunk-runner.js";

/** A minion's answer as Salt's cmd_iter gives it: `{ret, out?, retcode?, jid?}`, or `{failed: true}` when it did not return. */
export type MinionAnswer = Data;

export interface CmdRequest {
  tgt: unknown;
  tgtType: string;
  fun: string;
  arg: unknown[];
  kwarg: Data;
  ret: string;
  timeoutS?: number;
  /** publish kwargs the master forwards (ret_config, ret_kwargs) */
  pubKwargs: Data;
  /** Salt's expect_minions: minions that did not return are answered `{failed: true}` */
  expectMinions: boolean;
  /** Salt's batch (`N` or `N%`): the minions that answer a ping run in sub-jobs of that size */
  batch?: string;
  /** with batch: stop at the first minion with a retcode (the state's `failhard`) */
  failhard?: boolean;
}

export interface OrchestrateIO {
  /** Salt's saltutil.cmd: publish, wait, every answer by minion id */
  cmd(req: CmdRequest): Promise<Record<string, MinionAnswer>>;
  /** Salt's saltutil.runner with full_return: `{fun, jid, user, return, success}` */
  runner(name: string, arg: unknown[], kwarg: Data): Promise<Data>;
  /** Salt's saltutil.wheel: `{fun, jid, tag, user, return, success}` */
  wheel(name: string, arg: unknown[], kwarg: Data): Promise<Data>;
  /** Salt's fire_args: `salt/run/<orchestration jid>/args` with what a state is about to do */
  fireArgs?(data: Data): void;
  /** bus events from now on, each given to `seen` until it answers true (then true) or `timeoutMs` passes (false) */
  waitForEvents(seen: (tag: string, data: unknown) => boolean, timeoutMs: number): Promise<boolean>;
}

type StateFn = (call: StateCall, io: OrchestrateIO) => Promise<StateResult> | StateResult;

interface StateDef {
  fn: StateFn;
  /** arguments without a default (Salt's verify_data checks them) */
  required: string[];
  /** parameters the function names that are also compiler keywords (they reach it, as format_call passes them) */
  named?: string[];
}

const truthy = (v: unknown) => !(v === undefined || v === null || v === false || v === 0 || v === "" || (Array.isArray(v) && v.length === 0) || (isMap(v) && Object.keys(v).length === 0));

function failMinionsOf(v: unknown, warnings: string[]): string[] {
  if (v === undefined || v === null) return [];
  if (typeof v === "string") return v.split(",").map((m) => m.trim());
  if (Array.isArray(v)) return v.map(String);
  warnings.push("'fail_minions' needs to be a list or a comma separated string. Ignored.");
  return [];
}

/** The features brine's client does not have: the state fails naming them. */
function unsupported(name: unknown, kw: Data): StateResult | undefined {
  const why: string[] = [];
  if (kw.subset !== undefined && kw.subset !== null) why.push("subset: brine's client has no subset mode");
  if (kw.ssh === true) why.push("ssh: brine has no salt-ssh client");
  if (kw.fail_function !== undefined && kw.fail_function !== null) why.push("fail_function: brine runs no execution modules on the master");
  if (!why.length) return undefined;
  return { name, changes: {}, result: false, comment: `Not supported by brine's orchestrate: ${why.join("; ")}` };
}

function pubKwargs(kw: Data): Data {
  const out: Data = {};
  if (truthy(kw.ret_config)) out.ret_config = kw.ret_config;
  if (truthy(kw.ret_kwargs)) out.ret_kwargs = kw.ret_kwargs;
  return out;
}

const batchOf = (kw: Data): { batch?: string; failhard?: boolean } => (kw.batch === undefined || kw.batch === null ? {} : { batch: String(kw.batch), failhard: kw.failhard === true });

const timeoutOf = (v: unknown): number | undefined => (typeof v === "number" && v > 0 ? v : typeof v === "string" && Number(v) > 0 ? Number(v) : undefined);

/** saltmod.state: a state run on the targeted minions, failed when more than allow_fail of them failed. */
const saltState: StateFn = async (call, io) => {
  const kw = call.kwargs;
  const name = kw.name;
  const ret: StateResult = { name, changes: {}, comment: "", result: true };
  const allowFail = Number(kw.allow_fail ?? 0);
  if (!Number.isInteger(allowFail)) return { ...ret, result: false, comment: "Passed invalid value for 'allow_fail', must be an int" };
  const no = unsupported(name, kw);
  if (no) return no;
  let fun: string;
  const arg: unknown[] = [];
  if (truthy(kw.highstate)) fun = "state.highstate";
  else if (truthy(kw.top)) {
    fun = "state.top";
    arg.push(kw.top);
  } else if (truthy(kw.sls)) {
    fun = "state.sls";
    arg.push(Array.isArray(kw.sls) ? kw.sls.map(String).join(",") : kw.sls);
  } else return { ...ret, result: false, comment: "No highstate or sls specified, no execution made" };
  const kwarg: Data = {};
  const test = kw.test !== undefined && kw.test !== null ? kw.test : call.test ? true : undefined;
  if (test !== undefined) kwarg.test = test;
  if (truthy(kw.pillar)) kwarg.pillar = kw.pillar;
  if (kw.pillarenv !== undefined && kw.pillarenv !== null) kwarg.pillarenv = kw.pillarenv;
  if (kw.saltenv !== undefined && kw.saltenv !== null) kwarg.saltenv = kw.saltenv;
  if (kw.exclude !== undefined && kw.exclude !== null) kwarg.exclude = kw.exclude;
  kwarg.queue = kw.queue ?? false;
  const concurrent = kw.concurrent ?? false;
  if (typeof concurrent !== "boolean") return { ...ret, result: false, comment: "Must pass in boolean for value of 'concurrent'" };
  kwarg.concurrent = concurrent;
  const expect = kw.expect_minions === undefined ? true : truthy(kw.expect_minions);
  io.fireArgs?.({ type: "state", tgt: kw.tgt, name, args: { arg, kwarg, ret: String(kw.ret ?? ""), timeout: kw.timeout ?? null, tgt_type: String(kw.tgt_type ?? "glob"), ssh: false, expect_minions: expect, ...pubKwargs(kw), ...(kw.batch !== undefined && kw.batch !== null ? { batch: String(kw.batch) } : {}) } });
  let answers: Record<string, MinionAnswer>;
  try {
    answers = await io.cmd({ tgt: kw.tgt, tgtType: String(kw.tgt_type ?? "glob"), fun, arg, kwarg, ret: String(kw.ret ?? ""), timeoutS: timeoutOf(kw.timeout), pubKwargs: pubKwargs(kw), expectMinions: expect, ...batchOf(kw) });
  } catch (e) {
    return { ...ret, result: false, comment: (e as Error).message };
  }
  const first = Object.values(answers)[0];
  if (first && typeof first.jid === "string") ret.__jid__ = first.jid;
  const warnings: string[] = [];
  const failMinions = failMinionsOf(kw.fail_minions, warnings);
  if (warnings.length) ret.warnings = warnings;
  if (Object.keys(answers).length === 0 && expect) return { ...ret, result: false, comment: "No minions returned" };
  const changes: Data = {};
  const fail: string[] = [];
  const noChange: string[] = [];
  for (const [minion, m] of Object.entries(answers)) {
    const mret = "ret" in m ? m.ret : "return" in m ? m.return : false;
    const ok = m.failed === true || !("ret" in m || "return" in m) ? false : checkResult(mret, true);
    if (!ok) {
      if (!failMinions.includes(minion) && !fail.includes(minion)) fail.push(minion);
      changes[minion] = m.failed === true ? false : mret;
      continue;
    }
    if (isMap(mret) && Object.values(mret).some((s) => isMap(s) && truthy(s.changes))) changes[minion] = mret;
    else noChange.push(minion);
  }
  if (Object.keys(changes).length) ret.changes = { out: "highstate", ret: changes };
  if (fail.length > allowFail) {
    ret.result = false;
    ret.comment = `Run failed on minions: ${fail.join(", ")}`;
  } else {
    ret.comment = "States ran successfully.";
    if (Object.keys(changes).length) ret.comment += ` Updating ${Object.keys(changes).join(", ")}.`;
    if (noChange.length) ret.comment += ` No changes made to ${noChange.join(", ")}.`;
  }
  if ((truthy(kw.test) || call.test) && truthy(ret.changes) && ret.result === true) ret.result = null;
  return ret;
};

/** saltmod.function: one execution function on the targeted minions; a minion with a retcode or a False return fails it. */
const saltFunction: StateFn = async (call, io) => {
  const kw = call.kwargs;
  const name = kw.name;
  const ret: StateResult = { name, changes: {}, comment: "", result: true };
  let arg: unknown[] = Array.isArray(kw.arg) ? kw.arg : [];
  if (typeof kw.arg === "string") {
    ret.warnings = ["Please specify 'arg' as a list of arguments."];
    arg = kw.arg.split(/\s+/).filter(Boolean);
  }
  const no = unsupported(name, kw);
  if (no) return no;
  if (call.test) return { ...ret, comment: `Function ${String(name)} would be executed on target ${String(kw.tgt)}`, result: null };
  const kwarg = isMap(kw.kwarg) ? kw.kwarg : {};
  let answers: Record<string, MinionAnswer>;
  io.fireArgs?.({ type: "function", tgt: kw.tgt, name, args: { arg, kwarg, ret: String(kw.ret ?? ""), timeout: kw.timeout ?? null, tgt_type: String(kw.tgt_type ?? "glob"), ssh: false, expect_minions: truthy(kw.expect_minions), _cmd_meta: true, ...pubKwargs(kw) } });
  try {
    answers = await io.cmd({ tgt: kw.tgt, tgtType: String(kw.tgt_type ?? "glob"), fun: String(name), arg, kwarg, ret: String(kw.ret ?? ""), timeoutS: timeoutOf(kw.timeout), pubKwargs: pubKwargs(kw), expectMinions: truthy(kw.expect_minions), ...batchOf(kw) });
  } catch (e) {
    return { ...ret, result: false, comment: (e as Error).message };
  }
  const first = Object.values(answers)[0];
  if (first && typeof first.jid === "string") ret.__jid__ = first.jid;
  const warnings = [...((ret.warnings as string[] | undefined) ?? [])];
  const failMinions = failMinionsOf(kw.fail_minions, warnings);
  if (warnings.length) ret.warnings = warnings;
  const changes: Data = {};
  const fail: string[] = [];
  const addFail = (m: string) => !fail.includes(m) && fail.push(m);
  for (const [minion, m] of Object.entries(answers)) {
    let mret: unknown = false;
    if (truthy(m.retcode)) {
      ret.result = false;
      addFail(minion);
    }
    let ok: boolean;
    if (m.failed === true) ok = false;
    else {
      mret = "ret" in m ? m.ret : m.return;
      ok = mret !== false;
    }
    if (!ok && !failMinions.includes(minion)) addFail(minion);
    changes[minion] = mret;
  }
  if (Object.keys(answers).length === 0) return { ...ret, result: false, comment: "No minions responded" };
  if (Object.keys(changes).length) ret.changes = { ret: changes };
  if (fail.length) {
    ret.result = false;
    ret.comment = `Running function ${String(name)} failed on minions: ${fail.join(", ")}`;
  } else ret.comment = "Function ran successfully.";
  if (Object.keys(changes).length) ret.comment += ` Function ${String(name)} ran on ${Object.keys(changes).join(", ")}.`;
  return ret;
};

/** saltutil.runner's arguments: `arg`, `kwarg`, and every other non-dunder key as a keyword argument. */
function runnerArgs(kw: Data): { arg: unknown[]; kwarg: Data } {
  const arg = Array.isArray(kw.arg) ? kw.arg : [];
  const kwarg: Data = isMap(kw.kwarg) ? { ...kw.kwarg } : {};
  for (const [k, v] of Object.entries(kw)) if (k !== "name" && k !== "arg" && k !== "kwarg" && !k.startsWith("__")) kwarg[k] = v;
  return { arg, kwarg };
}

const saltRunner: StateFn = async (call, io) => {
  const name = String(call.kwargs.name);
  if (call.test) return { name, result: null, changes: {}, comment: `Runner function '${name}' would be executed.` };
  const { arg, kwarg } = runnerArgs(call.kwargs);
  io.fireArgs?.({ type: "runner", name, args: arg, kwargs: kwarg });
  const out = await io.runner(name, arg, kwarg);
  const rret = out.return;
  let success = out.success === undefined ? true : out.success === true;
  if (isMap(rret) && "Error" in rret) success = false;
  const ret: StateResult = { name, changes: { return: rret }, result: success, comment: `Runner function '${name}' ${success ? "executed" : "failed"}.` };
  if ("jid" in out) ret.__jid__ = out.jid;
  return ret;
};

const saltWheel: StateFn = async (call, io) => {
  const name = String(call.kwargs.name);
  if (call.test) return { name, result: null, changes: {}, comment: `Wheel function '${name}' would be executed.` };
  const arg = Array.isArray(call.kwargs.arg) ? call.kwargs.arg : [];
  const kwarg: Data = {};
  for (const [k, v] of Object.entries(call.kwargs)) if (k !== "name" && k !== "arg" && !k.startsWith("__")) kwarg[k] = v;
  io.fireArgs?.({ type: "wheel", name, args: kwarg });
  const out = await io.wheel(name, arg, kwarg);
  const wret = out.return;
  let success = out.success === undefined ? true : out.success === true;
  if (isMap(wret) && "Error" in wret) success = false;
  const ret: StateResult = { name, changes: { return: wret }, result: success, comment: `Wheel function '${name}' ${success ? "executed" : "failed"}.` };
  if ("jid" in out) ret.__jid__ = out.jid;
  return ret;
};

/** Salt's extract_changes for parallel_runners: state `changes` found at any depth. */
function extractChanges(obj: unknown): Data {
  if (!isMap(obj)) return {};
  if ("changes" in obj) {
    const c = obj.changes;
    if (isMap(c) && c.out === "highstate" && "ret" in c) return c.ret as Data;
    return isMap(c) ? c : {};
  }
  const found: Data = {};
  for (const [k, v] of Object.entries(obj)) {
    const c = extractChanges(v);
    if (Object.keys(c).length) found[k] = c;
  }
  return found;
}

const parallelRunners: StateFn = async (call, io) => {
  const name = call.kwargs.name;
  let runners = call.kwargs.runners;
  if (typeof runners === "string") runners = { [runners]: [{ name: runners }] };
  if (!isMap(runners)) return { name, result: false, changes: {}, comment: "The runners parameter must be a string or dict." };
  const configs: [string, Data][] = Object.entries(runners).map(([id, cfg]) => {
    const c: Data = {};
    if (Array.isArray(cfg)) for (const item of cfg) if (isMap(item)) Object.assign(c, item);
    if (isMap(cfg)) Object.assign(c, cfg);
    if (!("name" in c)) c.name = id;
    return [id, c];
  });
  if (call.test) return { name, result: null, changes: {}, comment: `Runner functions ${configs.map(([, c]) => `'${String(c.name)}'`).join(", ")} would be executed.` };
  let outs: Data[];
  try {
    outs = await Promise.all(configs.map(([, c]) => io.runner(String(c.name), [], isMap(c.kwarg) ? c.kwarg : {})));
  } catch (e) {
    return { name, result: false, success: false, changes: {}, comment: `One of the runners raised an exception: ${(e as Error).message}` };
  }
  const outputs: Record<string, unknown> = Object.fromEntries(configs.map(([id], i) => [id, outs[i]!.return]));
  const highstate = Object.values(outputs).every((o) => isMap(o) && o.outputter === "highstate" && "data" in o);
  let failed: string[];
  let changes: Data;
  let comment: string;
  if (highstate) {
    failed = Object.entries(outputs).filter(([, o]) => Number(((o as Data).data as Data)?.retcode ?? (o as Data).retcode ?? 0) !== 0).map(([id]) => id);
    comment = failed.length ? failed.map((id) => `Runner ${id} failed with return value:\n${JSON.stringify(outputs[id], null, 2)}`).join("\n") : "All runner functions executed successfully.";
    changes = {};
    for (const [id, o] of Object.entries(outputs)) {
      const c = extractChanges((o as Data).data);
      if (Object.keys(c).length) changes[id] = c;
    }
  } else {
    failed = configs.filter((_, i) => outs[i]!.success === false).map(([id]) => id);
    comment = failed.length === 0 ? "All runner functions executed successfully." : failed.length === 1 ? `Runner ${failed[0]} failed.` : `Runners ${failed.join(", ")} failed.`;
    changes = { ret: outputs };
  }
  return { name, result: failed.length === 0, changes, comment };
};

/** saltmod.wait_for_event: wait until an event whose tag matches `name` has named every id of `id_list`. */
const waitForEvent: StateFn = async (call, io) => {
  const kw = call.kwargs;
  const name = String(kw.name);
  const ret: StateResult = { name, changes: {}, comment: "", result: false };
  if (call.test) return { ...ret, comment: `Orchestration would wait for event '${name}'`, result: null };
  if ((kw.node ?? "master") !== "master") return { ...ret, comment: "Not supported by brine's orchestrate: node=minion (brine has no minion event bus on the master)" };
  const ids: unknown[] = Array.isArray(kw.id_list) ? [...kw.id_list] : [];
  const eventId = String(kw.event_id ?? "id");
  const timeoutS = Number(kw.timeout ?? 300);
  const seen: unknown[] = [];
  const started = Date.now();
  const same = (a: unknown, b: unknown) => a === b || (typeof a === "number" && typeof b === "bigint" && BigInt(a) === b);
  const done = await io.waitForEvents((tag, data) => {
    if (!fnmatch(tag, name) || !isMap(data)) return false;
    let val = data[eventId];
    if ((val === undefined || val === null) && isMap(data.data)) val = data.data[eventId];
    if (val !== undefined && val !== null) {
      for (const v of Array.isArray(val) ? val : [val]) {
        const i = ids.findIndex((x) => same(x, v));
        if (i < 0) continue;
        ids.splice(i, 1);
        seen.push(v);
      }
    }
    return ids.length === 0;
  }, Math.max(0, timeoutS) * 1000);
  if (seen.length) ret.changes = { minions_seen: seen };
  if (done) return { ...ret, result: true, comment: `All events seen in ${(Date.now() - started) / 1000} seconds.` };
  return { ...ret, comment: "Timeout value reached." };
};

const CHANGED = { testing: { old: "Unchanged", new: "Something pretended to change" } };

const testStates: Record<string, StateDef> = {
  "test.nop": { required: ["name"], fn: (c) => ({ name: c.kwargs.name, changes: {}, result: true, comment: "Success!" }) },
  "test.succeed_without_changes": { required: ["name"], fn: (c) => ({ name: c.kwargs.name, changes: {}, result: true, comment: String(c.kwargs.comment ?? "Success!") }) },
  "test.fail_without_changes": {
    required: ["name"],
    fn: (c) => ({ name: c.kwargs.name, changes: {}, result: false, comment: c.test ? "If we weren't testing, this would be a failure!" : String(c.kwargs.comment ?? "Failure!") }),
  },
  "test.succeed_with_changes": {
    required: ["name"],
    fn: (c) => ({ name: c.kwargs.name, changes: structuredClone(CHANGED), result: c.test ? null : true, comment: c.test ? "If we weren't testing, this would be successful with changes" : String(c.kwargs.comment ?? "Success!") }),
  },
  "test.fail_with_changes": {
    required: ["name"],
    fn: (c) => ({ name: c.kwargs.name, changes: structuredClone(CHANGED), result: c.test ? null : false, comment: c.test ? "If we weren't testing, this would be failed with changes" : String(c.kwargs.comment ?? "Failure!") }),
  },
  "test.configurable_test_state": {
    required: ["name"],
    fn: (c) => {
      const k = c.kwargs;
      const changes = k.changes ?? true;
      const result = k.result ?? true;
      const comment = String(k.comment ?? "");
      const r: StateResult = { name: k.name, changes: {}, result: false, comment };
      if (changes === true) r.changes = structuredClone(CHANGED);
      else if (changes !== false) {
        if (String(changes).toLowerCase() !== "random") throw new Error("You have specified the state option 'changes' with invalid arguments. It must be either True, False, or 'Random'");
        if (Math.random() < 0.5) r.changes = structuredClone(CHANGED);
      }
      if (typeof result === "boolean") r.result = result;
      else if (String(result).toLowerCase() === "random") r.result = Math.random() < 0.5;
      else throw new Error("You have specified the state option 'result' with invalid arguments. It must be either True, False, or 'Random'");
      if (typeof k.warnings === "string") r.warnings = [k.warnings];
      else if (Array.isArray(k.warnings)) r.warnings = k.warnings;
      else if (k.warnings !== undefined && k.warnings !== null) throw new Error("You have specified the state option 'warnings' with invalid arguments. It must be a string or a list of strings");
      if (c.test) {
        r.result = k.allow_test_mode_failure === true && result === false ? false : changes === false ? true : null;
        r.comment = comment || "This is a test";
      }
      return r;
    },
  },
  "test.show_notification": {
    required: ["name"],
    fn: (c) => {
      if (!truthy(c.kwargs.text)) throw new Error("Missing required argument text.");
      return { name: c.kwargs.name, changes: {}, result: true, comment: c.kwargs.text };
    },
  },
  "test.mod_watch": {
    required: ["name"],
    fn: (c) => {
      const withChanges: string[] = [];
      const reqs = c.low.__reqs__ as Record<string, Data[]> | undefined;
      for (const req of reqs?.watch ?? []) {
        const r = c.running[genTag(req as never)];
        if (r && truthy(r.changes)) withChanges.push(`${String(req.state)}: ${String(req.__id__)}`);
      }
      return { name: c.kwargs.name, result: (c.kwargs.result as boolean | undefined) ?? true, comment: c.kwargs.comment ?? "Watch statement fired.", changes: c.kwargs.changes ?? { "Requisites with changes": withChanges } };
    },
  },
};

export const STATES: Record<string, StateDef> = {
  "salt.state": { required: ["name", "tgt"], named: ["saltenv", "failhard"], fn: saltState },
  "salt.function": { required: ["name", "tgt"], named: ["failhard"], fn: saltFunction },
  "salt.runner": { required: ["name"], fn: saltRunner },
  "salt.wheel": { required: ["name"], fn: saltWheel },
  "salt.parallel_runners": { required: ["name", "runners"], fn: parallelRunners },
  "salt.wait_for_event": { required: ["name", "id_list"], fn: waitForEvent },
  ...testStates,
};

/** The Salt state modules brine knows by name but does not run in orchestration, with why. */
const KNOWN_UNSUPPORTED: Record<string, string> = {
  "test.check_pillar": "brine's orchestrate does not implement test.check_pillar yet",
};

/** The runtime chunk-runner.ts runs: these state modules over `io`. */
export function stateRuntime(io: OrchestrateIO, opts: { test: boolean; failhard: boolean; disabledRequisites?: string[]; now?: () => number }): StateRuntime {
  return {
    test: opts.test,
    failhard: opts.failhard,
    ...(opts.disabledRequisites ? { disabledRequisites: opts.disabledRequisites } : {}),
    now: opts.now ?? (() => performance.timeOrigin + performance.now()),
    lookup(full) {
      const d = STATES[full];
      if (d) return { required: d.required, ...(d.named ? { named: d.named } : {}) };
      const mod = full.split(".")[0]!;
      const reason = KNOWN_UNSUPPORTED[full] ?? (Object.keys(STATES).some((k) => k.startsWith(`${mod}.`)) ? `'${full}' is not a function of the '${mod}' state module in brine` : `the '${mod}' state module does not run on brine's master (orchestration runs: ${[...new Set(Object.keys(STATES).map((k) => k.split(".")[0]))].join(", ")})`);
      return { missing: reason };
    },
    hasModWatch: (state) => `${state}.mod_watch` in STATES,
    run: async (full, call) => STATES[full]!.fn(call, io),
  };
}
