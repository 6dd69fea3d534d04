/**
 * The state compiler orchestration runs on (Salt's salt/state.py State: call_high). Pure and sans-I/O: the
 * high data comes in already rendered (sls.ts), the state functions are run by an injected `StateRuntime`
 * (states.ts in production, tables in tests), and time comes from `now()`.
 *
 * Steps, as Salt takes them: `extend` reconciled into the high data, the high data verified, the `_in`
 * requisites (`require_in`, `watch_in`, `onchanges_in`, `onfail_in`, `prereq_in`, and `prereq`'s hidden
 * `prerequired`) moved onto the states they name, `exclude` applied, the high data compiled into low chunks
 * (one per state function and `names` entry) and sorted by `order` then `state+name+fun`. The chunks run in
 * that order; a chunk with requisites first runs what it requires (`require[_any]`, `watch[_any]`,
 * `onchanges[_any]`, `onfail[_any|_all]`, `prereq`), then itself, or records why not ("One or more
 * requisite failed", "The following requisites were not found", "State was not run because ..."). `watch` on
 * a state without `mod_watch` is a `require` (every `salt.*` state); `failhard` (the chunk's, else the run's)
 * stops the run at the first failure outside test mode; `parallel: True` starts the function and goes on,
 * its result joined when a requisite or the end of the run needs it; `retry` calls a state again until its
 * result is `until` (sleep injected).
 *
 * `use`/`use_in` copy arguments between states at compile time; `listen`/`listen_in` call mod_watch after the run.
 */
import { fnmatch } from "../../lib/targeting/fnmatch.js";

export type Data = Record<string, unknown>;

/** One low chunk: a state function call with its arguments and the compiler's keys. */
export interface Low extends Data {
  state: string;
  fun: string;
  name: unknown;
  __id__: string;
}

/** A state function's return, then the run's bookkeeping keys (`__run_num__`, `__id__`, ...). */
export interface StateResult extends Data {
  result: boolean | null;
  changes: unknown;
  comment?: unknown;
}

export type Running = Record<string, StateResult>;

/** What a state function is called with. */
export interface StateCall {
  /** its keyword arguments: the chunk without the compiler's keywords */
  kwargs: Data;
  /** the chunk itself (read only) */
  low: Readonly<Low>;
  /** test mode for this call (a prereq's first call is always a test) */
  test: boolean;
  /** the results so far (mod_watch reads them) */
  running: Readonly<Running>;
}

/** The state functions and the run's options (injected). */
export interface StateRuntime {
  /**
   * `{required, named}`: the function exists, needs `required` and names `named` as parameters (a named
   * parameter reaches it even when the compiler also reads the key: `saltenv`, `failhard`, as format_call
   * passes them); `{missing}`: Salt's "Reason:" line, or ""
   */
  lookup(full: string): { required: string[]; named?: string[] } | { missing: string };
  /** whether the state module has `mod_watch` (else `watch` means `require`) */
  hasModWatch(state: string): boolean;
  /** runs one state function; a throw becomes Salt's "An exception occurred in this state" result */
  run(full: string, call: StateCall): Promise<StateResult>;
  /** milliseconds since the epoch, sub-millisecond precision allowed */
  now(): number;
  /** waits between `retry` attempts (default: a timer) */
  sleep?(ms: number): Promise<void>;
  test: boolean;
  /** the run's `failhard` (a chunk's own `failhard` wins) */
  failhard: boolean;
  /** Salt's `disabled_requisites` */
  disabledRequisites?: string[];
}

/** Keys of a chunk that are the compiler's, never a state function's argument (Salt's STATE_INTERNAL_KEYWORDS). */
export const REQUISITES = ["onchanges", "onchanges_any", "onfail", "onfail_any", "onfail_all", "onfail_stop", "prereq", "prerequired", "watch", "watch_any", "require", "require_any", "listen"] as const;
const REQUISITES_IN = ["onchanges_in", "onfail_in", "prereq_in", "watch_in", "require_in", "listen_in"];
const RUNTIME_KEYS = [
  "fun", "state", "check_cmd", "cmd_opts_exclude", "failhard", "onlyif", "unless", "creates", "retry", "order", "parallel", "prereq", "prereq_in",
  "prerequired", "reload_modules", "reload_grains", "reload_pillar", "runas", "runas_password", "fire_event", "saltenv", "umask", "use", "use_in",
  "__env__", "__sls__", "__id__", "__sls_included_from__", "__orchestration_jid__", "__pub_user", "__pub_arg", "__pub_jid", "__pub_fun", "__pub_tgt",
  "__pub_ret", "__pub_pid", "__pub_tgt_type", "__prereq__", "__prerequired__", "__umask__",
];
export const INTERNAL_KEYWORDS: ReadonlySet<string> = new Set([...REQUISITES, ...REQUISITES_IN, ...RUNTIME_KEYS]);
/** Requisites brine's compiler refuses (Salt has them; brine does not run them yet). */
const UNSUPPORTED_REQUISITES: string[] = [];
/** Salt's req_in_all: the keys `use`/`use_in` never copy. */
const REQ_IN_ALL = new Set(["require_in", "watch_in", "onfail_in", "onchanges_in", "use", "use_in", "prereq", "prereq_in", "require", "watch", "onfail", "onfail_stop", "onchanges"]);

/** Salt's state_args: the one-key argument names of a state. */
function stateArgs(id: string, state: string, high: High): Set<string> {
  const body = high[id];
  const run = isMap(body) ? body[state] : undefined;
  return new Set((Array.isArray(run) ? run : []).filter((a): a is Data => isMap(a) && Object.keys(a).length === 1).map(firstKey));
}
/** Run-time keys brine refuses in orchestration rather than ignore. */
const UNSUPPORTED_RUNTIME = ["onlyif", "unless", "creates", "check_cmd"];

export function isMap(v: unknown): v is Data {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v) && !(v instanceof Uint8Array);
}

const str = (v: unknown): string => (typeof v === "string" ? v : v === null || v === undefined ? "None" : typeof v === "boolean" ? (v ? "True" : "False") : String(v));

/** Salt's running-dict key: `state_|-id_|-name_|-fun`. */
export function genTag(low: { state: unknown; __id__: unknown; name: unknown; fun: unknown }): string {
  return `${str(low.state)}_|-${str(low.__id__)}_|-${str(low.name)}_|-${str(low.fun)}`;
}

const firstKey = (m: Data): string => Object.keys(m)[0] ?? "";

/** A requisite entry as `{type: value}` (a bare string is `{id: string}`; `pkg.installed` keys lose the function). */
function trimReq(req: unknown): Data | null {
  if (typeof req === "string") return { id: req };
  if (!isMap(req) || Object.keys(req).length === 0) return null;
  const k = firstKey(req);
  return k.includes(".") ? { [k.split(".")[0]!]: req[k] } : req;
}

// --- high data -> low chunks ------------------------------------------------------------------------------

type High = Record<string, unknown>;
type Body = Record<string, unknown>;

/** Salt's find_name: ids whose state `state` has `name: <name>` (or the id itself); `sls` lists an SLS's ids. */
function findName(name: unknown, state: string, high: High, strict: boolean): [string, string][] {
  const out: [string, string][] = [];
  const key = str(name);
  const own = high[key];
  if (isMap(own) && (!strict || state in own)) {
    out.push([key, state]);
    return out;
  }
  if (state === "sls") {
    for (const [id, body] of Object.entries(high)) if (isMap(body) && body.__sls__ === name) out.push([id, Object.keys(body).find((k) => !k.startsWith("__")) ?? ""]);
    return out;
  }
  for (const [id, body] of Object.entries(high)) {
    if (!isMap(body) || !Array.isArray(body[state])) continue;
    for (const arg of body[state] as unknown[]) if (isMap(arg) && Object.keys(arg).length === 1 && arg[firstKey(arg)] === name) out.push([id, state]);
  }
  return out;
}

/** Salt's reconcile_extend: each `extend` entry merged into the state it names (requisites appended, other arguments replaced). */
export function reconcileExtend(high: High, strict = false): string[] {
  const errors: string[] = [];
  const ext = high.__extend__;
  delete high.__extend__;
  if (!Array.isArray(ext)) return errors;
  const slsExcludes = (Array.isArray(high.__exclude__) ? high.__exclude__ : []).map((e) => (typeof e === "string" ? e : isMap(e) ? e.sls : undefined)).filter((e) => e);
  for (const chunk of ext) {
    if (!isMap(chunk)) continue;
    for (const [rawName, body] of Object.entries(chunk)) {
      if (!isMap(body)) continue;
      let name = rawName;
      const stateType = Object.keys(body).find((k) => !k.startsWith("__")) ?? "";
      if (!isMap(high[name]) || !(stateType in (high[name] as Body))) {
        const ids = findName(name, stateType, high, strict);
        if (ids.length !== 1) {
          const env = str(body.__env__ ?? "base");
          const sls = str(body.__sls__ ?? "base");
          errors.push(
            `Cannot extend ID '${name}' in '${env}:${sls}'. It is not part of the high state.\nThis is likely due to a missing include statement or an incorrectly typed ID.\nEnsure that a state with an ID of '${name}' is available\nin environment '${env}' and to SLS '${sls}'`,
          );
          continue;
        }
        name = ids[0]![0];
      }
      if (slsExcludes.includes(body.__sls__)) continue;
      const target = high[name] as Body;
      for (const [state, run] of Object.entries(body)) {
        if (state.startsWith("__")) continue;
        if (!(state in target)) {
          target[state] = run;
          continue;
        }
        const list = target[state] as unknown[];
        for (const arg of Array.isArray(run) ? run : []) {
          let updated = false;
          for (let i = 0; i < list.length; i++) {
            const val = list[i];
            if (typeof arg === "string" && typeof val === "string") {
              list[i] = arg;
              updated = true;
              continue;
            }
            if (isMap(arg) && isMap(val)) {
              const k = firstKey(arg);
              if (k === firstKey(val)) {
                if ((REQUISITES as readonly string[]).includes(k) && Array.isArray(val[k])) (val[k] as unknown[]).push(...(Array.isArray(arg[k]) ? arg[k] : [arg[k]]));
                else list[i] = arg;
                updated = true;
              }
              if (k === "name" && firstKey(val) === "names") list[i] = arg;
            }
          }
          if (!updated) list.push(arg);
        }
      }
    }
  }
  return errors;
}

/** Salt's verify_high: structural errors of the high data, with Salt's messages. */
export function verifyHigh(high: High): string[] {
  const errors: string[] = [];
  const reqs = new Map<string, Map<string, string> & { state?: string }>();
  for (const [name, body] of Object.entries(high)) {
    if (name.startsWith("__")) continue;
    if (!isMap(body)) {
      errors.push(`The type ${name} in ${str(body)} is not formatted as a dictionary`);
      continue;
    }
    const sls = str(body.__sls__);
    for (const [state, run] of Object.entries(body)) {
      if (state.startsWith("__")) continue;
      if (run === null || run === undefined) {
        errors.push(`ID '${name}' in SLS '${sls}' contains a short declaration (${state}) with a trailing colon. When not passing any arguments to a state, the colon must be omitted.`);
        continue;
      }
      if (!Array.isArray(run)) {
        errors.push(`State '${name}' in SLS '${sls}' is not formed as a list`);
        continue;
      }
      let fun = state.includes(".") ? 1 : 0;
      for (const arg of run) {
        if (typeof arg === "string") {
          fun++;
          if (arg.trim().includes(" ")) errors.push(`The function "${arg}" in state "${name}" in SLS "${sls}" has whitespace, a function with whitespace is not supported, perhaps this is an argument that is missing a ":"`);
          continue;
        }
        if (!isMap(arg)) continue;
        const k = firstKey(arg);
        if (k === "names" && !Array.isArray(arg[k])) errors.push(`The 'names' argument in state '${name}' in SLS '${sls}' needs to be formed as a list`);
        if (["require", "watch", "prereq", "onchanges"].includes(k)) {
          if (!Array.isArray(arg[k])) errors.push(`The ${k} statement in state '${name}' in SLS '${sls}' needs to be formed as a list`);
          else {
            const mine = new Map<string, string>() as Map<string, string> & { state?: string };
            mine.state = state;
            reqs.set(name, mine);
            for (const raw of arg[k] as unknown[]) {
              const req = typeof raw === "string" ? { id: raw } : raw;
              if (!isMap(req)) {
                errors.push(`Requisite declaration ${str(req)} in SLS ${sls} is not formed as a single key dictionary`);
                continue;
              }
              const rk = firstKey(req);
              const rv = req[rk];
              if (rk.includes(".")) errors.push(`Invalid requisite type '${rk}' in state '${name}', in SLS '${sls}'. Requisite types must not contain dots, did you mean '${rk.slice(0, rk.indexOf("."))}'?`);
              if (rv !== null && typeof rv === "object") {
                errors.push(`Illegal requisite "${JSON.stringify(rv)}", please check your syntax.\n`);
                continue;
              }
              mine.set(str(rv), rk);
              const other = reqs.get(str(rv));
              if (other && other.get(name) === state && other.state === mine.get(str(rv))) errors.push(`A recursive requisite was found, SLS "${sls}" ID "${name}" ID "${str(rv)}"`);
            }
          }
          if (Object.keys(arg).length !== 1) errors.push(`Multiple dictionaries defined in argument of state '${name}' in SLS '${sls}'`);
        }
        if (UNSUPPORTED_REQUISITES.includes(k)) errors.push(`The '${k}' requisite in state '${name}' in SLS '${sls}' is not supported by brine's orchestrate`);
      }
      if (!fun) {
        if (state === "require" || state === "watch") continue;
        errors.push(`No function declared in state '${name}' in SLS '${sls}'`);
      } else if (fun > 1) {
        const funs = [...(state.includes(".") ? [state.split(".").slice(1).join(".")] : []), ...run.filter((a): a is string => typeof a === "string")];
        errors.push(`Too many functions declared in state '${name}' in SLS '${sls}'. Please choose one of the following: ${funs.join(", ")}`);
      }
    }
  }
  return errors;
}

/** Salt's requisite_in: `X_in` on A naming B becomes `X: [A]` on B; `prereq` marks its targets `prerequired`. */
export function requisiteIn(high: High, disabled: readonly string[] = []): string[] {
  const errors: string[] = [];
  const extend = new Map<string, Body>();
  const ensure = (id: string, state: string): unknown[] => {
    let e = extend.get(id);
    if (!e) extend.set(id, (e = {}));
    if (!Array.isArray(e[state])) e[state] = [];
    return e[state] as unknown[];
  };
  const addReq = (target: string, tstate: string, rkey: string, state: string, id: string, body: Body) => {
    const list = ensure(target, tstate);
    const e = extend.get(target)!;
    e.__env__ = body.__env__;
    e.__sls__ = body.__sls__;
    const existing = list.find((x) => isMap(x) && firstKey(x) === rkey) as Data | undefined;
    if (existing) (existing[rkey] as unknown[]).push({ [state]: id });
    else list.push({ [rkey]: [{ [state]: id }] });
  };
  for (const [id, body] of Object.entries(high)) {
    if (!isMap(body)) continue;
    for (const [state, run] of Object.entries(body)) {
      if (state.startsWith("__") || !Array.isArray(run)) continue;
      for (const arg of run) {
        if (!isMap(arg) || Object.keys(arg).length < 1) continue;
        const key = firstKey(arg);
        if (!["require_in", "watch_in", "onfail_in", "onchanges_in", "prereq", "prereq_in", "use", "use_in"].includes(key) || disabled.includes(key)) continue;
        const rkey = key.split("_")[0]!;
        const items = arg[key];
        const sls = str(body.__sls__);
        if (isMap(items)) {
          for (const [rawState, name] of Object.entries(items)) {
            let st = rawState;
            if (st.includes(".")) {
              errors.push(`Invalid requisite in ${rkey}: ${st} for ${str(name)}, in SLS '${sls}'. Requisites must not contain dots, did you mean '${st.slice(0, st.indexOf("."))}'?`);
              st = st.split(".")[0]!;
            }
            if (key === "prereq" || key === "prereq_in" || key === "use" || key === "use_in") continue; // only their list form is expanded
            addReq(str(name), st, rkey, state, id, body);
          }
        }
        if (!Array.isArray(items)) continue;
        let hinges: [string, string][] = [];
        for (const raw of items) {
          let ind: Data | undefined;
          if (isMap(raw)) ind = raw;
          else if (isMap(high[str(raw)])) ind = { [Object.keys(high[str(raw)] as Body).find((k) => !k.startsWith("__")) ?? ""]: raw };
          else {
            // a bare name: the state whose `name:` argument it is
            for (const [oid, ob] of Object.entries(high)) {
              if (!isMap(ob)) continue;
              for (const [ost, orun] of Object.entries(ob)) {
                if (ost.startsWith("__") || !Array.isArray(orun)) continue;
                for (const j of orun) if (isMap(j) && "name" in j && j.name === raw) ind = { [ost]: oid };
              }
            }
          }
          if (!ind || Object.keys(ind).length < 1) continue;
          let pstate = firstKey(ind);
          const pname = ind[pstate];
          if (pstate === "sls") hinges = Object.entries(high).flatMap(([nid, item]) => (isMap(item) && item.__sls__ === pname ? Object.keys(item).filter((k) => !k.startsWith("__")).map((k) => [nid, k] as [string, string]) : []));
          else hinges.push([str(pname), pstate]);
          if (pstate.includes(".")) {
            errors.push(`Invalid requisite in ${rkey}: ${pstate} for ${str(pname)}, in SLS '${sls}'. Requisites must not contain dots, did you mean '${pstate.slice(0, pstate.indexOf("."))}'?`);
            pstate = pstate.split(".")[0]!;
          }
          for (const [name, tstate] of hinges) {
            if (key === "prereq_in") ensure(id, state).push({ prerequired: [{ [tstate]: name }] });
            if (key === "prereq") {
              for (const [extId, reqState] of findName(name, tstate, high, true)) ensure(extId, reqState).push({ prerequired: [{ [state]: id }] });
              continue;
            }
            if (key === "use" || key === "use_in") {
              // use: the named state's arguments added to this one; use_in: this state's added to the named one
              for (const [extId, reqState] of findName(name, tstate, high, true)) {
                if (!extId) continue;
                const [from, fromState, to, toState] = key === "use" ? [extId, reqState, id, state] : [id, state, extId, reqState];
                const ignore = new Set([...REQ_IN_ALL, ...stateArgs(to, toState, high)]);
                const target = ensure(to, toState);
                for (const a of ((high[from] as Body)[fromState] as unknown[]) ?? []) {
                  if (!isMap(a) || Object.keys(a).length !== 1) continue;
                  const k = firstKey(a);
                  if (!ignore.has(k) && k !== "name" && k !== "names") target.push(a);
                }
              }
              continue;
            }
            addReq(name, tstate, rkey, state, id, body);
          }
        }
      }
    }
  }
  high.__extend__ = [...extend.entries()].map(([k, v]) => ({ [k]: v }));
  errors.push(...reconcileExtend(high, true));
  return errors;
}

/** Salt's apply_exclude: `exclude` entries (`sls` globs, `id`s) remove their states. */
export function applyExclude(high: High): void {
  const exclude = high.__exclude__;
  delete high.__exclude__;
  if (!Array.isArray(exclude)) return;
  const exSls = new Set<string>();
  const exId = new Set<string>();
  for (const e of exclude) {
    if (typeof e === "string") exSls.add(e);
    else if (isMap(e) && Object.keys(e).length === 1) {
      if ("sls" in e) exSls.add(str(e.sls));
      else if ("id" in e) exId.add(str(e.id));
    }
  }
  for (const [name, body] of Object.entries(high)) {
    if (name.startsWith("__") || !isMap(body) || typeof body.__sls__ !== "string") continue;
    for (const pat of exSls) if (fnmatch(body.__sls__, pat)) exId.add(name);
  }
  for (const id of exId) delete high[id];
}

/** Salt's pad_funcs (state.high's data): `pkg.installed: [...]` becomes `pkg: [..., installed]`. */
export function padFuncs(high: High): void {
  for (const [name, body] of Object.entries(high)) {
    if (typeof body === "string" && body.includes(".")) {
      const [st, ...rest] = body.split(".");
      high[name] = { [st!]: [rest.join(".")] };
      continue;
    }
    if (!isMap(body)) continue;
    const seen = new Set<string>();
    for (const key of Object.keys(body).sort()) {
      if (key.startsWith("_") || !Array.isArray(body[key])) continue;
      if (key.includes(".")) {
        const [st, ...rest] = key.split(".");
        if (seen.has(st!)) continue;
        const run = body[key] as unknown[];
        delete body[key];
        body[st!] = [...run, rest.join(".")];
        seen.add(st!);
        continue;
      }
      seen.add(key);
    }
  }
}

/** Salt's order_chunks: `order` numbers (or first/last/negative) then state+name+fun, as Python sorts strings. */
export function orderChunks(chunks: Low[]): Low[] {
  let cap = 1;
  for (const c of chunks) if (Number.isInteger(c.order) && (c.order as number) > cap - 1 && (c.order as number) > 0) cap = (c.order as number) + 100;
  for (const c of chunks) {
    if (!("order" in c)) {
      c.order = cap;
      continue;
    }
    if (typeof c.order !== "number") c.order = c.order === "last" ? cap + 1000000 : c.order === "first" ? 0 : cap;
    if ("name_order" in c) {
      c.order = (c.order as number) + (c.name_order as number) / 10000;
      delete c.name_order;
    }
    if ((c.order as number) < 0) c.order = cap + 1000000 + (c.order as number);
  }
  const key = (c: Low) => `${str(c.state)}${str(c.name)}${str(c.fun)}`;
  return chunks.sort((a, b) => (a.order as number) - (b.order as number) || (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

/** Salt's compile_high_data: one low chunk per state function (and per `names` entry), ordered. */
export function compileHighData(high: High, orchestrationJid?: string): Low[] {
  const chunks: Low[] = [];
  for (const [id, body] of Object.entries(high)) {
    if (id.startsWith("__") || !isMap(body)) continue;
    for (const [state, run] of Object.entries(body)) {
      if (state.startsWith("__") || !Array.isArray(run)) continue;
      const funcs: string[] = [];
      const names: unknown[] = [];
      const chunk: Low = { state, name: id, __id__: id, fun: "" };
      if (orchestrationJid !== undefined) chunk.__orchestration_jid__ = orchestrationJid;
      for (const k of ["__sls__", "__env__", "__sls_included_from__"]) if (k in body) chunk[k] = body[k];
      for (const arg of run) {
        if (typeof arg === "string") {
          if (!funcs.includes(arg)) funcs.push(arg);
          continue;
        }
        if (!isMap(arg)) continue;
        for (const [k, v] of Object.entries(arg)) {
          if (k === "names") {
            for (const n of Array.isArray(v) ? v : []) if (!names.some((x) => JSON.stringify(x) === JSON.stringify(n))) names.push(n);
          } else if (k === "state") continue;
          else if (k === "name" && typeof v !== "string") chunk.name = id;
          else chunk[k] = v;
        }
      }
      const entries: Low[] = [];
      if (names.length) {
        names.forEach((entry, i) => {
          const live: Low = structuredClone(chunk);
          if (isMap(entry)) {
            const n = firstKey(entry);
            live.name = n;
            for (const m of Array.isArray(entry[n]) ? (entry[n] as unknown[]) : []) if (isMap(m)) Object.assign(live, m);
          } else live.name = entry;
          live.name_order = i + 1;
          entries.push(live);
        });
      } else entries.push(chunk);
      for (const e of entries) for (const fun of funcs) chunks.push({ ...structuredClone(e), fun });
    }
  }
  return orderChunks(chunks);
}

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
