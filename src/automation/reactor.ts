/**
 * The reactor (Salt's salt/utils/reactor.py): which SLS files an event's tag selects (`reactor:` globs,
 * fnmatch), rendering them with `tag` and `data` (brine's render pipe, `renderer`, Jinja + YAML), compiling the
 * high data into ordered reactions, and turning each reaction into the call a client would make. Pure: the
 * file reads and the calls are injected (src/automation/thread.ts wires them).
 *
 * Reaction forms (Salt's ReactWrap): `<id>: {<state>.<fun>: [ {key: value}, ... ]}` with state `local` (alias
 * `cmd`), `runner`, `wheel` or `caller`. Arguments: `args` (a list of one-key maps, or a map) gives keyword
 * arguments (caller: a plain list is positional, Salt's legacy form); otherwise `arg` (list) and `kwarg` (map),
 * and for runner/wheel every other key is a keyword argument (Salt maps them with format_call). `local` also
 * takes `tgt`, `tgt_type` (`expr_form`), `ret`. `caller` needs a minion on the master, which brine does not
 * have: such reactions are skipped with a warning (also at start, naming the file and the reaction).
 */
import { fnmatchToRegExp } from "../lib/targeting/index.js";
import type { ReactorMapEntry } from "./options.js";

/** Salt's ReactWrap aliases. */
const ALIASES: Record<string, string> = { cmd: "local" };
/** Keys of a reaction that are the compiler's or the wrapper's, never a function's keyword argument. */
const INTERNAL = new Set(["__id__", "__sls__", "name", "order", "fun", "key", "state", "arg", "kwarg", "args", "tgt", "tgt_type", "expr_form", "ret", "timeout", "__env__"]);

export type ReactionState = "local" | "runner" | "wheel" | "caller";

export interface Reaction {
  id: string;
  sls: string;
  state: ReactionState;
  fun: string;
  order: number;
  low: Record<string, unknown>;
}

/** What to send for one reaction. */
export type ReactionCall =
  | { kind: "local"; tgt: string | string[]; tgtType: string; fun: string; arg: unknown[]; ret: string }
  | { kind: "runner" | "wheel"; fun: string; arg: unknown[]; kwarg: Record<string, unknown> }
  | { kind: "unsupported"; why: string };

/** A tag glob map compiled for matching. */
export class ReactorMap {
  private compiled: { glob: string; re: RegExp; files: string[] }[] = [];

  constructor(private entries: ReactorMapEntry[]) {
    this.compile();
  }

  private compile(): void {
    this.compiled = this.entries.map((e) => {
      const [glob, files] = Object.entries(e)[0]!;
      return { glob, re: fnmatchToRegExp(glob), files };
    });
  }

  /** Salt's list_reactors: every SLS path of every glob matching the tag, in map order. */
  filesFor(tag: string): string[] {
    const out: string[] = [];
    for (const c of this.compiled) if (c.re.test(tag)) out.push(...c.files);
    return out;
  }

  globs(): string[] {
    return this.compiled.map((c) => c.glob);
  }

  list(): ReactorMapEntry[] {
    return this.entries.map((e) => ({ ...e }));
  }

  /** Salt's add_reactor: refused when the glob is already there. */
  add(tag: string, files: string[]): { status: boolean; comment: string } {
    if (this.entries.some((e) => Object.keys(e)[0] === tag)) return { status: false, comment: "Reactor already exists." };
    this.entries.push({ [tag]: files });
    this.compile();
    return { status: true, comment: "Reactor added." };
  }

  delete(tag: string): { status: boolean; comment: string } {
    const i = this.entries.findIndex((e) => Object.keys(e)[0] === tag);
    if (i < 0) return { status: false, comment: "Reactor does not exists." };
    this.entries.splice(i, 1);
    this.compile();
    return { status: true, comment: "Reactor deleted." };
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v);
}

/** A list of one-key maps merged into one map (Salt's repack_dictlist); null when it is not one. */
function repack(v: unknown): Record<string, unknown> | null {
  if (isMap(v)) return { ...v };
  if (!Array.isArray(v)) return null;
  const out: Record<string, unknown> = {};
  for (const item of v) {
    if (!isMap(item)) return null;
    Object.assign(out, item);
  }
  return out;
}

/**
 * Salt's compile_high_data + order_chunks for reaction files: rendered files (merged by id, later files win)
 * into reactions sorted by `order` then state+name+fun. Errors (Salt's verify_high) make the event react with
 * nothing, as in Salt.
 */
export function compileReactions(high: Record<string, { sls: string; body: unknown }>): { reactions: Reaction[]; errors: string[] } {
  const reactions: Reaction[] = [];
  const errors: string[] = [];
  for (const [id, { sls, body }] of Object.entries(high)) {
    if (!isMap(body)) {
      errors.push(`ID ${id} in SLS ${sls} is not a dictionary`);
      continue;
    }
    for (const [key, val] of Object.entries(body)) {
      if (key.startsWith("__")) continue;
      const dot = key.indexOf(".");
      let state = dot < 0 ? key : key.slice(0, dot);
      let fun = dot < 0 ? "" : key.slice(dot + 1);
      if (val !== null && !Array.isArray(val)) {
        errors.push(`The type ${key} in ${id} in SLS ${sls} is not formatted as a list`);
        continue;
      }
      const low: Record<string, unknown> = {};
      for (const item of val ?? []) {
        if (typeof item === "string" && !fun) fun = item;
        else if (isMap(item)) Object.assign(low, item);
        else errors.push(`An argument of ${key} in ${id} in SLS ${sls} is not a one-key map: ${JSON.stringify(item)}`);
      }
      if (!fun && typeof low.fun === "string") fun = low.fun;
      if (!fun) {
        errors.push(`No function declared in ${key} of ${id} in SLS ${sls}`);
        continue;
      }
      state = ALIASES[state] ?? state;
      if (!["local", "runner", "wheel", "caller"].includes(state)) {
        errors.push(`State '${state}.${fun}' in ${id} in SLS ${sls} is not a reaction (local, runner, wheel, caller)`);
        continue;
      }
      const order = typeof low.order === "number" ? low.order : 10000;
      reactions.push({ id, sls, state: state as ReactionState, fun, order, low: { ...low, __id__: id, __sls__: sls, name: low.name ?? id } });
    }
  }
  reactions.sort((a, b) => a.order - b.order || `${a.state}${a.low.name}${a.fun}`.localeCompare(`${b.state}${b.low.name}${b.fun}`));
  return { reactions, errors };
}

/** Salt's ReactWrap.run: the call one reaction makes, or why it cannot be made. */
export function reactionCall(r: Reaction): ReactionCall {
  const low = r.low;
  if (r.state === "caller") return { kind: "unsupported", why: `caller reactions run on a minion that lives on the master, which brine has not (reaction '${r.id}' in ${r.sls})` };
  let arg: unknown[] = [];
  let kwarg: Record<string, unknown> = {};
  if ("args" in low) {
    const packed = repack(low.args);
    if (packed === null || (Array.isArray(low.args) && low.args.length > 0 && Object.keys(packed).length === 0)) {
      return { kind: "unsupported", why: `Reactor '${r.id}' failed to execute ${r.state} '${r.fun}': Incorrect argument format, check the Reactor System documentation for the correct format.` };
    }
    kwarg = packed;
  } else {
    if (Array.isArray(low.arg)) arg = [...low.arg];
    else if (low.arg !== undefined) arg = [low.arg];
    if (isMap(low.kwarg)) kwarg = { ...low.kwarg };
    if (r.state !== "local") for (const [k, v] of Object.entries(low)) if (!INTERNAL.has(k) && !k.startsWith("__")) kwarg[k] = v;
  }
  if (r.state === "local") {
    const tgt = low.tgt;
    if (typeof tgt !== "string" && !(Array.isArray(tgt) && tgt.every((t) => typeof t === "string"))) {
      return { kind: "unsupported", why: `Reactor '${r.id}' failed to execute local '${r.fun}': no tgt` };
    }
    const tgtType = String(low.tgt_type ?? low.expr_form ?? "glob");
    const fullArg = Object.keys(kwarg).length ? [...arg, { ...kwarg, __kwarg__: true }] : arg;
    return { kind: "local", tgt: tgt as string | string[], tgtType, fun: r.fun, arg: fullArg, ret: typeof low.ret === "string" ? low.ret : "" };
  }
  return { kind: r.state, fun: r.fun, arg, kwarg };
}

/** Reactions named in a file's text that brine cannot run (`caller.*`), for the warning at start. */
export function unsupportedIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/^\s*(caller\.[\w.]+)\s*:/gm)) out.push(m[1]!);
  return out;
}
