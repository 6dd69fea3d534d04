/**
 * The state compiler orchestration runs on, its compile half (Salt's salt/state.py State: the steps of call_high
 * before anything runs). Pure and sans-I/O: the high data comes in already rendered (sls.ts).
 *
 * Steps, as Salt takes them: `extend` reconciled into the high data, the high data verified, the `_in`
 * requisites (`require_in`, `watch_in`, `onchanges_in`, `onfail_in`, `prereq_in`, and `prereq`'s hidden
 * `prerequired`) moved onto the states they name, `exclude` applied, the high data compiled into low chunks
 * (one per state function and `names` entry) and sorted by `order` then `state+name+fun`. `use`/`use_in` copy
 * arguments between states here. Running the chunks, with their requisites evaluated as they run, is
 * chunk-runner.ts.
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
export const UNSUPPORTED_RUNTIME = ["onlyif", "unless", "creates", "check_cmd"];

export function isMap(v: unknown): v is Data {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v) && !(v instanceof Uint8Array);
}

export const str = (v: unknown): string => (typeof v === "string" ? v : v === null || v === undefined ? "None" : typeof v === "boolean" ? (v ? "True" : "False") : String(v));

/** Salt's running-dict key: `state_|-id_|-name_|-fun`. */
export function genTag(low: { state: unknown; __id__: unknown; name: unknown; fun: unknown }): string {
  return `${str(low.state)}_|-${str(low.__id__)}_|-${str(low.name)}_|-${str(low.fun)}`;
}

export const firstKey = (m: Data): string => Object.keys(m)[0] ?? "";

/** A requisite entry as `{type: value}` (a bare string is `{id: string}`; `pkg.installed` keys lose the function). */
export function trimReq(req: unknown): Data | null {
  if (typeof req === "string") return { id: req };
  if (!isMap(req) || Object.keys(req).length === 0) return null;
  const k = firstKey(req);
  return k.includes(".") ? { [k.split(".")[0]!]: req[k] } : req;
}

// --- high data -> low chunks ------------------------------------------------------------------------------

export type High = Record<string, unknown>;
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
