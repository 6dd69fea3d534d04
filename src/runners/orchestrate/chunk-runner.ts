/**
 * The state compiler orchestration runs on, its run half (Salt's salt/state.py State.call_chunks and friends, and
 * call_high as a whole). Pure and sans-I/O: the state functions are run by an injected `StateRuntime` (states.ts
 * in production, tables in tests), and time comes from `now()`.
 *
 * The chunks compiled by compiler.ts run in their order; a chunk with requisites first runs what it requires
 * (`require[_any]`, `watch[_any]`, `onchanges[_any]`, `onfail[_any|_all]`, `prereq`), then itself, or records why
 * not ("One or more requisite failed", "The following requisites were not found", "State was not run because
 * ..."). `watch` on a state without `mod_watch` is a `require` (every `salt.*` state); `failhard` (the chunk's,
 * else the run's) stops the run at the first failure outside test mode; `parallel: True` starts the function and
 * goes on, its result joined when a requisite or the end of the run needs it; `retry` calls a state again until
 * its result is `until` (sleep injected); `listen`/`listen_in` call mod_watch after the run.
 */
import { fnmatch } from "../../lib/targeting/fnmatch.js";
import {
  INTERNAL_KEYWORDS, REQUISITES, UNSUPPORTED_RUNTIME, applyExclude, compileHighData, firstKey, genTag, isMap, reconcileExtend, requisiteIn, str, trimReq, verifyHigh, type Data, type High, type Low, type Running, type StateResult, type StateRuntime,
} from "./compiler.js";

/** Salt's state.check_result: false when any state (at any depth under a non-state map) failed, or for a non-map. */
export function checkResult(running: unknown, recurse = false): boolean {
  if (!isMap(running) || Object.keys(running).length === 0) return false;
  for (const [id, r] of Object.entries(running)) {
    const expected = id === "__extend__" ? Array.isArray(r) : isMap(r);
    if (!recurse && !expected) return false;
    if (isMap(r)) {
      if (r.result === false) return false;
      if (!("result" in r) && !checkResult(r, true)) return false;
    }
  }
  return true;
}

// --- running the chunks ------------------------------------------------------------------------------------

const CHECKED = ["require", "require_any", "watch", "watch_any", "prereq", "onfail", "onfail_any", "onfail_all", "onchanges", "onchanges_any"] as const;

/** Python's `time().isoformat()` of a local time: HH:MM:SS[.ffffff]. */
export function localClock(ms: number): string {
  const d = new Date(Math.floor(ms));
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  const us = Math.round((ms - Math.floor(ms / 1000) * 1000) * 1000) % 1_000_000;
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}${us ? `.${p(us, 6)}` : ""}`;
}

/** Milliseconds with microsecond precision, as Salt reports `duration`. */
const ms3 = (x: number) => Math.round(Math.max(0, x) * 1000) / 1000;

/** A requisite Salt cannot resolve; its text is Salt's, returned as the orchestration's error (not a BrineError). */
class RequisiteError extends Error {}

/** One run of ordered chunks (Salt's State.call_chunks and friends; one instance per run). */
export class ChunkRunner {
  private runNum = 0;
  private readonly pre: Running = {};
  private active = new Set<string>();
  /** parallel states started and not joined yet: their placeholder result → the finished result */
  private readonly procs = new Map<StateResult, Promise<StateResult>>();

  constructor(
    private readonly rt: StateRuntime,
    private chunks: Low[],
  ) {}

  /**
   * Salt's call_listen: after the run, each state that `listen`s to a state that changed (or is named by a
   * changed state's `listen_in`) has its mod_watch called, as `listener_<id>`; a listen naming no state is a
   * `Listen_Error` result.
   */
  async callListen(running: Running): Promise<Running> {
    const chunks = this.chunks;
    const crefs = chunks.map((c) => ({ ref: [c.state, c.__id__, c.name] as unknown[], chunk: c }));
    const listeners: { key: unknown[]; val: unknown[] }[] = [];
    for (const c of chunks) {
      if (Array.isArray(c.listen)) listeners.push({ key: [c.state, c.__id__, c.name], val: c.listen });
      if (Array.isArray(c.listen_in)) for (const l of c.listen_in) if (isMap(l)) for (const [k, v] of Object.entries(l)) listeners.push({ key: [k, v, "lookup"], val: [{ [c.state]: c.__id__ }] });
    }
    const matches = (ref: unknown[], st: unknown, v: unknown) => st === ref[0] && ref.includes(v);
    const errors: Running = {};
    const listenError = (st: unknown, v: unknown) => {
      errors[genTag({ state: "Listen_Error", __id__: `listen_${str(v)}`, name: `listen_${str(st)}`, fun: "Listen_Error" })] = { comment: `Referenced state ${str(st)}: ${str(v)} does not exist`, name: `listen_${str(st)}:${str(v)}`, result: false, changes: {} };
    };
    const watchers: Low[] = [];
    for (const { key, val } of listeners) {
      for (let to of val) {
        if (!isMap(to)) {
          const hit = [...chunks].reverse().find((c) => c.__id__ === to || c.name === to);
          if (!hit) continue;
          to = { [hit.state]: hit.__id__ };
        }
        for (const [lkey, lval] of Object.entries(to as Data)) {
          const targets = crefs.filter((c) => matches(c.ref, lkey, lval));
          if (!targets.length) {
            listenError(lkey, lval);
            continue;
          }
          for (const t of targets) {
            const r = running[genTag(t.chunk)];
            if (!r || isEmpty(r.changes)) continue;
            const listening = crefs.filter((c) => matches(c.ref, key[0], key[1]));
            if (!listening.length) {
              listenError(key[0], key[1]);
              continue;
            }
            for (const l of listening) {
              const low: Low = { ...l.chunk, sfun: l.chunk.fun, fun: "mod_watch", __id__: `listener_${l.chunk.__id__}` };
              for (const req of REQUISITES) delete low[req];
              watchers.push(low);
            }
          }
        }
      }
    }
    if (watchers.length) {
      this.chunks = watchers;
      try {
        Object.assign(running, await this.callChunks());
      } finally {
        this.chunks = chunks;
      }
    }
    for (const e of Object.values(errors)) e.__run_num__ = this.runNum++;
    return Object.assign(running, errors);
  }

  private failhard(low: Low, running: Running): boolean {
    if (this.rt.test) return false;
    const tag = genTag(low);
    const on = "failhard" in low ? low.failhard : this.rt.failhard;
    if (on && tag in running) return running[tag]!.result === null ? false : !running[tag]!.result;
    return false;
  }

  /** Salt's reconcile_procs: every parallel state in `dict` joined. */
  private async reconcile(dict: Running): Promise<void> {
    for (const r of Object.values(dict)) {
      const p = this.procs.get(r);
      if (!p) continue;
      Object.assign(r, await p);
      this.procs.delete(r);
    }
  }

  async callChunks(): Promise<Running> {
    let running: Running = {};
    for (const low of this.chunks) {
      if ("__FAILHARD__" in running) {
        delete running.__FAILHARD__;
        break;
      }
      const tag = genTag(low);
      if (!(tag in running)) {
        running = await this.callChunk(low, running);
        if (this.failhard(low, running)) break;
      }
      this.active = new Set();
    }
    delete running.__FAILHARD__;
    await this.reconcile(running);
    return running;
  }

  /** Salt's state.single: the chunk verified (its errors are the answer), then called without requisites. */
  async single(low: Low): Promise<Running | string[]> {
    const errors = this.verifyData(low);
    if (errors.length) return errors;
    const running: Running = { [genTag(low)]: await this.call(low, {}) };
    await this.reconcile(running);
    return running;
  }

  private verifyData(low: Low): string[] {
    const errors: string[] = [];
    if (!("state" in low)) errors.push('Missing "state" data');
    if (!("fun" in low)) errors.push('Missing "fun" data');
    if (!("name" in low)) errors.push('Missing "name" data');
    if (low.name && typeof low.name !== "string") {
      const t = typeof low.name === "number" ? (Number.isInteger(low.name) ? "int" : "float") : Array.isArray(low.name) ? "list" : typeof low.name === "boolean" ? "bool" : "dict";
      errors.push(`ID '${str(low.name)}' ${"__sls__" in low ? `in SLS '${str(low.__sls__)}' ` : ""}is not formed as a string, but is a ${t}`);
    }
    if (errors.length) return errors;
    const full = `${low.state}.${low.fun}`;
    const found = this.rt.lookup(full);
    if ("missing" in found) {
      if ("__sls__" in low) {
        errors.push(`State '${full}' was not found in SLS '${str(low.__sls__)}'`);
        if (found.missing) errors.push(`Reason: ${found.missing}`);
      } else errors.push(`Specified state '${full}' was not found`);
    } else {
      for (const a of found.required) if (!(a in low)) errors.push(`Missing parameter ${a} for state ${full}`);
      for (const k of UNSUPPORTED_RUNTIME) if (k in low) errors.push(`The '${k}' argument of state ${full} is not supported by brine's orchestrate`);
      if ("retry" in low && low.parallel) errors.push(`The 'retry' argument of state ${full} is not supported with 'parallel' by brine's orchestrate`);
    }
    this.watchAsRequire(low);
    if (Array.isArray(low.require)) {
      for (const r of low.require) {
        const req = trimReq(r);
        if (!req) continue;
        const k = firstKey(req);
        if (low.state === k && typeof req[k] === "string" && (fnmatch(str(low.name), req[k] as string) || fnmatch(low.__id__, req[k] as string))) {
          errors.push(`Recursive require detected in SLS ${str(low.__sls__)} for require ${pyDict(req)} in ID ${low.__id__}`);
        }
      }
    }
    return errors;
  }

  /** `watch` on a state without mod_watch is a `require` (and `watch_any` a `require_any`). */
  private watchAsRequire(low: Low): void {
    if (this.rt.hasModWatch(low.state)) return;
    for (const [w, r] of [["watch", "require"], ["watch_any", "require_any"]] as const) {
      if (!(w in low)) continue;
      const moved = Array.isArray(low[w]) ? (low[w] as unknown[]) : [];
      low[r] = Array.isArray(low[r]) ? [...(low[r] as unknown[]), ...moved] : moved;
      delete low[w];
    }
  }

  /** The chunks a requisite entry names; undefined when it names none. */
  private matching(req: Data): Low[] {
    const k = firstKey(req);
    const v = req[k];
    const out: Low[] = [];
    for (const c of this.chunks) {
      if (k === "sls") {
        if (fnmatch(str(c.__sls__), str(v)) || (Array.isArray(c.__sls_included_from__) && c.__sls_included_from__.includes(v))) out.push(c);
        continue;
      }
      if (typeof v !== "string") throw new RequisiteError(`Could not locate requisite of [${k}] present in state with name [${str(c.name)}]`);
      if ((fnmatch(str(c.name), v) || fnmatch(c.__id__, v)) && (k === "id" || c.state === k)) out.push(c);
    }
    return out;
  }

  private async checkRequisite(low: Low, running: Running, pre: boolean): Promise<{ status: string; reqs: Record<string, Low[]> }> {
    this.watchAsRequire(low);
    const kinds: string[] = [...CHECKED, ...(pre ? ["prerequired"] : [])];
    if (!kinds.some((k) => k in low) && !("prerequired" in low)) return { status: "met", reqs: {} };
    await this.reconcile(running);
    const disabled = this.rt.disabledRequisites ?? [];
    const reqs: Record<string, Low[]> = Object.fromEntries(kinds.map((k) => [k, [] as Low[]]));
    for (const kind of kinds) {
      const list = low[kind];
      if (list === null || list === undefined || disabled.includes(kind)) continue;
      for (const raw of Array.isArray(list) ? list : [list]) {
        const req = trimReq(raw);
        if (!req || req[firstKey(req)] === null || req[firstKey(req)] === undefined) continue;
        const found = this.matching(req);
        if (!found.length) return { status: "unmet", reqs: {} };
        reqs[kind]!.push(...found);
      }
    }
    const stats = new Set<string>();
    for (const [kind, reqChunks] of Object.entries(reqs)) {
      const s = new Set<string>();
      const source = kind.startsWith("prereq") && !kind.startsWith("prerequired") ? this.pre : running;
      const dict: Running = {};
      for (const c of reqChunks) {
        const t = genTag(c);
        if (source[t]) dict[t] = source[t]!;
      }
      await this.reconcile(dict);
      for (const c of reqChunks) {
        const r = dict[genTag(c)];
        if (!r) {
          s.add("unmet");
          continue;
        }
        if (kind.startsWith("onfail")) {
          if (r.result === true) {
            s.add("onfail");
            continue;
          }
        } else if (r.result === false) {
          s.add("fail");
          continue;
        }
        if (kind.startsWith("onchanges")) {
          s.add(isEmpty(r.changes) ? "onchanges" : "onchangesmet");
          continue;
        }
        if (kind.startsWith("watch") && !isEmpty(r.changes)) {
          s.add("change");
          continue;
        }
        const isPre = kind.startsWith("prereq") && !kind.startsWith("prerequired");
        if (kind.startsWith("prereq") && r.result === null && isPre) s.add("premet");
        if (kind.startsWith("prereq") && r.result !== null) {
          if (isPre) s.add("pre");
        } else if (r.__state_ran__ !== false) s.add("met");
      }
      if (kind.endsWith("_any") || kind === "onfail") {
        if ((s.has("met") || s.has("change")) && s.has("fail")) s.delete("fail");
        if (s.has("onchangesmet")) {
          s.delete("onchanges");
          s.delete("fail");
        }
        if (s.has("onfail") && s.has("met")) s.delete("onfail");
      }
      if (kind.endsWith("_all") && s.has("onfail") && s.has("met")) s.delete("met");
      for (const x of s) stats.add(x);
    }
    let status = "met";
    if (stats.has("unmet")) status = "unmet";
    else if (stats.has("fail")) status = "fail";
    else if (stats.has("pre")) status = stats.has("premet") ? "met" : "pre";
    else if (stats.has("onfail") && !stats.has("onchangesmet")) status = "onfail";
    else if (stats.has("onchanges") && !stats.has("onchangesmet")) status = "onchanges";
    else if (stats.has("change")) status = "change";
    else if (stats.has("onfail")) status = "onfail";
    return { status, reqs };
  }

  /** A result recorded without calling the function (Salt's fake-duration results). */
  private noCall(low: Low, fields: Data, bump = true): StateResult {
    const now = this.rt.now();
    const r: StateResult = { changes: {}, result: false, duration: ms3(0), start_time: localClock(now), ...fields, __run_num__: bump ? this.runNum++ : this.runNum } as StateResult;
    r.__sls__ = low.__sls__ ?? null;
    r.__id__ = low.__id__;
    r.name = low.name;
    return r;
  }

  private async callChunk(low: Low, running: Running, depth = 0): Promise<Running> {
    const tag = genTag(low);
    if (!low.prerequired) this.active.add(tag);
    const kinds: string[] = [...CHECKED];
    let checked;
    if (!low.__prereq__) {
      kinds.push("prerequired");
      checked = await this.checkRequisite(low, running, true);
    } else checked = await this.checkRequisite(low, running, false);
    const { status, reqs } = checked;
    if (status === "unmet") {
      const lost: Record<string, Data[]> = {};
      const toRun: Low[] = [];
      for (const kind of kinds) {
        lost[kind] = [];
        if (!(kind in low)) continue;
        for (const raw of Array.isArray(low[kind]) ? (low[kind] as unknown[]) : []) {
          const req = trimReq(raw);
          if (!req) continue;
          const v = req[firstKey(req)];
          const found = v === null || v === undefined ? [] : this.matching(req);
          for (const c of found) {
            if (kind === "prereq") c.__prereq__ = true;
            else if (kind === "prerequired" && firstKey(req) !== "sls") c.__prerequired__ = true;
            toRun.push(c);
          }
          if (!found.length) lost[kind]!.push(req);
        }
      }
      if (Object.values(lost).some((l) => l.length)) {
        let comment = "The following requisites were not found:\n";
        for (const [kind, l] of Object.entries(lost)) {
          if (!l.length) continue;
          comment += `${" ".repeat(19)}${kind}:\n`;
          for (const r of l) comment += `${" ".repeat(23)}${firstKey(r)}: ${str(r[firstKey(r)])}\n`;
        }
        const dict = low.__prereq__ ? this.pre : running;
        dict[tag] = this.noCall(low, { comment });
        return running;
      }
      let last: Low = low;
      for (const c of toRun) {
        last = c;
        const ctag = genTag(c);
        if (ctag in running) continue;
        if (this.active.has(ctag)) {
          if (c.__prerequired__) {
            if (!(tag in this.pre)) {
              low.__prereq__ = true;
              this.pre[ctag] = await this.call(low, running);
            }
            return running;
          }
          running[tag] = { changes: {}, result: false, comment: "Recursive requisite found", __run_num__: this.runNum, __sls__: low.__sls__ ?? null, __id__: low.__id__, name: low.name };
          this.runNum++;
          return running;
        }
        running = await this.callChunk(c, running);
        if (this.failhard(c, running)) {
          running.__FAILHARD__ = { result: false, changes: {} };
          return running;
        }
      }
      if (low.__prereq__) {
        const again = await this.checkRequisite(low, running, false);
        const r = await this.call(low, running);
        if (isEmpty(r.changes) && again.status === "change") {
          r.changes = { watch: "watch" };
          r.result = null;
        }
        this.pre[tag] = r;
      } else if (depth + 1 >= 20) {
        running[tag] = { changes: {}, result: false, comment: "Recursive requisite found", __run_num__: this.runNum, __sls__: low.__sls__ ?? null, __id__: low.__id__, name: low.name };
      } else running = await this.callChunk(low, running, depth + 1);
      if (this.failhard(last, running)) running.__FAILHARD__ = { result: false, changes: {} };
      return running;
    }
    switch (status) {
      case "met":
        if (low.__prereq__) this.pre[tag] = await this.call(low, running);
        else running[tag] = await this.call(low, running);
        break;
      case "fail": {
        if (tag in this.pre) {
          const r = this.pre[tag]!;
          if (!isEmpty(r.changes)) r.changes = {};
          r.__run_num__ = this.runNum;
          r.__sls__ = low.__sls__ ?? null;
          r.__id__ = low.__id__;
          r.name = low.name;
          running[tag] = r;
        } else {
          const failed = new Set<string>();
          for (const list of Object.values(reqs)) {
            for (const c of list) {
              const r = this.pre[genTag(c)] ?? running[genTag(c)];
              if (r && r.result === false) failed.add(`${str(c.__sls__)}.${c.__id__}`);
            }
          }
          const r = this.noCall(low, { comment: `One or more requisite failed: ${[...failed].join(", ")}` }, false);
          running[tag] = r;
          this.pre[tag] = r;
        }
        this.runNum++;
        break;
      }
      case "change": {
        if (low.__prereq__) {
          this.pre[tag] = await this.call(low, running);
          break;
        }
        let r = await this.call(low, running);
        if (isEmpty(r.changes) && !r.skip_watch) {
          const watchLow: Low = { ...low, sfun: low.fun, fun: "mod_watch", __reqs__: reqs };
          r = await this.call(watchLow, running);
        }
        running[tag] = r;
        break;
      }
      case "pre": {
        const r = this.noCall(low, { result: true, comment: "No changes detected" });
        running[tag] = r;
        this.pre[tag] = r;
        break;
      }
      case "onfail":
        running[tag] = this.noCall(low, { result: true, comment: "State was not run because onfail req did not change", __state_ran__: false });
        break;
      case "onchanges":
        running[tag] = this.noCall(low, { result: true, comment: "State was not run because none of the onchanges reqs changed", __state_ran__: false });
        break;
      default:
        if (low.__prereq__) this.pre[tag] = await this.call(low, running);
        else running[tag] = await this.call(low, running);
    }
    return running;
  }

  /** Salt's State.call: verify the chunk, run its function, stamp the result. */
  private async call(low: Low, running: Running, attempt = 1): Promise<StateResult> {
    const start = this.rt.now();
    const errors = this.verifyData(low);
    if (errors.length) return { result: false, name: low.name, changes: {}, comment: errors.map((e) => `${e}\n`).join(""), __run_num__: this.runNum++ };
    const full = `${low.state}.${low.fun}`;
    const prereq = low.__prereq__ === true;
    const kwargs: Data = {};
    const found = this.rt.lookup(full);
    const named = "named" in found ? (found.named ?? []) : [];
    for (const [k, v] of Object.entries(low)) if (!INTERNAL_KEYWORDS.has(k) || named.includes(k)) kwargs[k] = v;
    const test = prereq ? true : this.rt.test;
    const invoke = async (): Promise<StateResult> => {
      try {
        const r = await this.rt.run(full, { kwargs, low, test, running });
        return isMap(r) ? r : ({ result: false, name: low.name, changes: {}, comment: `State ${full} returned ${str(r)}, not a state return` } as StateResult);
      } catch (e) {
        return { result: false, name: kwargs.name ?? low.name ?? low.__id__, changes: {}, comment: `An exception occurred in this state: ${(e as Error)?.stack ?? String(e)}` };
      }
    };
    let ret: StateResult;
    if (low.parallel && !prereq) {
      ret = { name: kwargs.name ?? low.name, result: null, changes: {}, comment: "Started in a separate process" };
      this.procs.set(
        ret,
        invoke().then((r) => {
          const end = this.rt.now();
          return { ...r, start_time: localClock(start), duration: ms3(end - start), __parallel__: true };
        }),
      );
    } else ret = await invoke();
    if (prereq) {
      low.__prereq__ = false;
      return ret;
    }
    ret.__sls__ = low.__sls__ ?? null;
    ret.__run_num__ = this.runNum++;
    ret.start_time = localClock(start);
    ret.duration = ms3(this.rt.now() - start);
    ret.__id__ = low.__id__;
    if ("retry" in low && !low.parallel) return this.retry(low, running, ret, attempt);
    return ret;
  }

  /** Salt's `retry`: the state called again (after interval + splay) until its result is `until` or attempts run out. */
  private async retry(low: Low, running: Running, ret: StateResult, attempt: number): Promise<StateResult> {
    const r = retryData(low.retry);
    low.retry = r;
    const py = (v: unknown) => (v === true ? "True" : v === false ? "False" : v === null || v === undefined ? "None" : String(v));
    if (this.rt.test) {
      ret.comment = [ret.comment ? str(ret.comment) : "", `The state would be retried every ${r.interval} seconds (with a splay of up to ${r.splay} seconds) a maximum of ${r.attempts} times or until a result of ${py(r.until)} is returned`].join("  ");
      return ret;
    }
    if (r.until === ret.result || r.attempts <= attempt) return ret;
    const interval = r.interval + (r.splay ? Math.floor(Math.random() * (r.splay + 1)) : 0);
    await (this.rt.sleep ? this.rt.sleep(interval * 1000) : new Promise<void>((res) => setTimeout(res, interval * 1000)));
    const next = await this.call(low, running, attempt + 1);
    next.comment = [`Attempt ${attempt}: Returned a result of "${py(ret.result)}", with the following comment: "${str(ret.comment)}"`, next.comment ? str(next.comment) : ""].join("\n");
    next.duration = ms3(Number(next.duration ?? 0) + Number(ret.duration ?? 0) + interval * 1000);
    if (attempt === 1) next.start_time = ret.start_time;
    return next;
  }
}

/** Salt's verify_retry_data: until (bool), attempts, interval, splay (ints) with Salt's defaults; `retry: True` the defaults, `False` no attempts. */
function retryData(v: unknown): { until: boolean; attempts: number; interval: number; splay: number } {
  const defaults = { until: true, attempts: 2, splay: 0, interval: 30 };
  if (v === false) return { ...defaults, attempts: 0 };
  if (!isMap(v)) return defaults;
  const int = (x: unknown, d: number) => (typeof x === "number" && Number.isInteger(x) ? x : typeof x === "boolean" ? Number(x) : d);
  return { until: typeof v.until === "boolean" ? v.until : defaults.until, attempts: int(v.attempts, defaults.attempts), interval: int(v.interval, defaults.interval), splay: int(v.splay, defaults.splay) };
}

function isEmpty(v: unknown): boolean {
  if (v === null || v === undefined || v === false || v === "" || v === 0) return true;
  if (Array.isArray(v)) return v.length === 0;
  if (isMap(v)) return Object.keys(v).length === 0;
  return false;
}

/** A one-key requisite as Python prints a dict (`{'salt': 'x'}`), for Salt's messages. */
function pyDict(m: Data): string {
  return `{${Object.entries(m).map(([k, v]) => `'${k}': ${typeof v === "string" ? `'${v}'` : str(v)}`).join(", ")}}`;
}

/**
 * Salt's State.call_high: extend, verify, requisite_in, exclude, compile, run. Errors before anything runs come
 * back as a list of messages (Salt's answer: the run fails with them, nothing ran).
 */
export async function callHigh(input: High, rt: StateRuntime, orchestrationJid?: string): Promise<Running | string[]> {
  const high: High = structuredClone(input);
  const errors = reconcileExtend(high);
  errors.push(...verifyHigh(high));
  if (errors.length) return errors;
  errors.push(...requisiteIn(high, rt.disabledRequisites));
  applyExclude(high);
  if (errors.length) return errors;
  const chunks = compileHighData(high, orchestrationJid);
  try {
    const runner = new ChunkRunner(rt, chunks);
    return await runner.callListen(await runner.callChunks());
  } catch (e) {
    if (e instanceof RequisiteError) return [e.message];
    throw e;
  }
}

/** Salt's state.single: one chunk, verified and run (no requisites). */
export async function callSingle(low: Low, rt: StateRuntime): Promise<Running | string[]> {
  return new ChunkRunner(rt, [low]).single(low);
}
