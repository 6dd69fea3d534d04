/**
 * The execution functions a test minion answers, and the `_return` load it sends back
 * (`salt/minion.py: Minion._thread_return`, `load_args_and_kwargs`; `salt/modules/test.py`,
 * `saltutil.py`).
 *
 * Arguments: a `{"__kwarg__": true, …}` map holds keyword arguments; a string `key=value` (key a Python
 * identifier, not `==`) is a keyword argument with its value YAML-parsed; anything else is positional,
 * unchanged. The running-jobs table is what `saltutil.find_job` reads: while a job runs it holds the
 * proc record `{jid, fun, arg, pid, tgt, tgt_type, ret, user}`.
 */
import { chmodSync, existsSync, mkdirSync, statSync, writeFileSync, appendFileSync } from "node:fs";
import path from "node:path";
import { gunzipSync } from "node:zlib";
import YAML from "yaml";
import type { WireValue } from "../../shared/protocol/msgpack.js";
import { sharedTimer, type CoarseTimer } from "../../shared/coarse-timer.js";

export interface CmdRunResult {
  stdout: string;
  retcode?: number;
  /** how long the stand-in "runs" */
  delayMs?: number;
}

/** A stand-in for `cmd.run`: what the command prints and returns. */
export type CmdRunStandIn = (cmd: string, self: { id: string }) => CmdRunResult;

/** Default `cmd.run`: echo, sleep, true/false, hostname, id, whoami; anything else is "not found". */
export const defaultCmdRun: CmdRunStandIn = (cmd, self) => {
  const words = cmd.trim().split(/\s+/);
  const unquote = (s: string) => s.replace(/^(['"])(.*)\1$/s, "$2");
  switch (words[0]) {
    case "echo":
      return { stdout: unquote(cmd.trim().slice(4).trim()) };
    case "sleep":
      return { stdout: "", delayMs: Math.max(0, Number(words[1]) * 1000 || 0) };
    case "true":
    case ":":
      return { stdout: "" };
    case "false":
      return { stdout: "", retcode: 1 };
    case "hostname":
      return { stdout: self.id };
    case "whoami":
      return { stdout: "root" };
    case "id":
      return { stdout: "uid=0(root) gid=0(root) groups=0(root)" };
    case undefined:
    case "":
      return { stdout: "" };
    default:
      return { stdout: `/bin/sh: 1: ${words[0]}: not found`, retcode: 127 };
  }
};

/** A job as published (the decrypted publish load). */
export interface PublishLoad {
  jid: string;
  fun: string | string[];
  arg: WireValue[];
  tgt: WireValue;
  tgt_type?: string;
  ret?: WireValue;
  user?: string;
  master_id?: WireValue;
  metadata?: WireValue;
  [k: string]: WireValue | undefined;
}

export interface ProcRecord {
  jid: string;
  fun: string | string[];
  arg: WireValue[];
  pid: number;
  tgt: WireValue;
  tgt_type: string;
  ret: WireValue;
  user: string;
}

export interface JobOutcome {
  return: unknown;
  retcode: number | Record<string, number>;
  success: boolean | Record<string, boolean>;
  out?: string;
}

export interface MinionSelf {
  id: string;
  grains: Record<string, unknown>;
  pillar: unknown;
  version: string;
}

const KWARG = /^([^\d\W][\w.-]*)=(?!=)(.*)$/su;

function yamlify(v: string): unknown {
  if (v === "") return v;
  try {
    const parsed = YAML.parse(v);
    return parsed === undefined ? v : parsed;
  } catch {
    return v;
  }
}

/** Salt's load_args_and_kwargs for a function taking *args and **kwargs. */
export function splitArgs(arg: readonly WireValue[]): { args: unknown[]; kwargs: Record<string, unknown> } {
  const args: unknown[] = [];
  const kwargs: Record<string, unknown> = {};
  for (const a of arg) {
    if (a !== null && typeof a === "object" && !Array.isArray(a) && !Buffer.isBuffer(a) && a.__kwarg__ === true) {
      for (const [k, v] of Object.entries(a)) if (k !== "__kwarg__") kwargs[k] = v;
      continue;
    }
    if (typeof a === "string") {
      const m = KWARG.exec(a);
      if (m) {
        kwargs[m[1]!] = yamlify(m[2]!);
        continue;
      }
    }
    args.push(a);
  }
  return { args, kwargs };
}

/** A failed call of the in-repo minion, answered with Salt's minion text as its return (not a BrineError: the text is Salt's). */
class FunctionError extends Error {}

const PRETEND = { testing: { old: "Unchanged", new: "Something pretended to change" } };

/**
 * A stand-in for `state.sls`/`state.highstate` (the test minion has no state system): one state per SLS name, in
 * Salt's highstate return shape, changed and successful, failed when the name starts with `fail`; `test=True`
 * gives result None. Enough for an orchestration's `salt.state` to judge the run as it judges a real one.
 * (`state.apply <mods>` is not a stand-in: it reads the SLS from the master, applyFromMaster.)
 */
function standInStateRun(mods: string[], test: boolean): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  mods.forEach((mod, i) => {
    const fail = mod.startsWith("fail");
    const fun = fail ? "fail_with_changes" : "succeed_with_changes";
    const [key, entry] = stateEntry("test", mod, mod, mod, fun, i, {
      changes: PRETEND,
      result: test ? null : !fail,
      comment: test ? "If we weren't testing, this would be successful with changes" : fail ? "Failure!" : "Success!",
    });
    out[key] = entry;
  });
  return out;
}

/** One state's return in Salt's highstate shape (`<module>_|-<id>_|-<name>_|-<function>`). */
function stateEntry(mod: string, sls: string, id: string, name: string, fun: string, runNum: number, r: { changes: Record<string, unknown>; result: boolean | null; comment: string }): [string, Record<string, unknown>] {
  return [
    `${mod}_|-${id}_|-${name}_|-${fun}`,
    { name, changes: r.changes, result: r.result, comment: r.comment, __sls__: sls, __run_num__: runNum, start_time: new Date().toISOString().slice(11, 23) + "000", duration: 0.5, __id__: id },
  ];
}

/** What `state.apply` reads from the master the minion is connected to: a file of its fileserver (undefined: none). */
export type MasterFile = (filePath: string, saltenv: string) => Promise<Buffer | undefined>;

/** salt/states/test.py's functions, as far as a state run of the test minion needs them. */
function testState(fun: string, comment: string | undefined, test: boolean): { changes: Record<string, unknown>; result: boolean | null; comment: string } | undefined {
  switch (fun) {
    case "nop":
    case "succeed_without_changes":
      return { changes: {}, result: true, comment: comment ?? "Success!" };
    case "succeed_with_changes":
      return test ? { changes: PRETEND, result: null, comment: "If we weren't testing, this would be successful with changes" } : { changes: PRETEND, result: true, comment: comment ?? "Success!" };
    case "fail_without_changes":
      return { changes: {}, result: false, comment: test ? "If we weren't testing, this would be a failure!" : (comment ?? "Failure!") };
    case "fail_with_changes":
      return test ? { changes: PRETEND, result: null, comment: "If we weren't testing, this would be failed with changes" } : { changes: PRETEND, result: false, comment: comment ?? "Failure!" };
    default:
      return undefined;
  }
}

/**
 * `state.apply <mods>` run from the master's files: each SLS (`a.b` is `a/b.sls`, else `a/b/init.sls`) is fetched
 * from the master's fileserver, parsed as plain YAML (no template renderer: a file with Jinja is refused), and its
 * `test.*` states run (salt/states/test.py); any other state module fails as one that is not available. A missing
 * SLS gives Salt's error list ("No matching sls found for … in env …", retcode 1).
 */
async function applyFromMaster(mods: string[], saltenv: string, test: boolean, fetch: MasterFile, ctx: { retcode: number }): Promise<unknown> {
  const out: Record<string, Record<string, unknown>> = {};
  const errors: string[] = [];
  let runNum = 0;
  for (const sls of mods) {
    const base = sls.replace(/\./g, "/");
    const text = (await fetch(`${base}.sls`, saltenv)) ?? (await fetch(`${base}/init.sls`, saltenv));
    if (text === undefined) {
      errors.push(`No matching sls found for '${sls}' in env '${saltenv}'`);
      continue;
    }
    const src = text.toString("utf8");
    if (/\{[{%#]/.test(src)) {
      errors.push(`Rendering SLS '${saltenv}:${sls}' failed: the in-repo test minion renders plain YAML only (no Jinja)`);
      continue;
    }
    let high: unknown;
    try {
      high = YAML.parse(src);
    } catch (e) {
      errors.push(`Rendering SLS '${saltenv}:${sls}' failed: ${(e as Error).message}`);
      continue;
    }
    if (high === null || high === undefined) continue;
    if (typeof high !== "object" || Array.isArray(high)) {
      errors.push(`SLS '${sls}' does not render to a dictionary`);
      continue;
    }
    for (const [id, body] of Object.entries(high as Record<string, unknown>)) {
      // `id: mod.fun` is the short form of `id: {mod.fun: []}` (salt/state.py pad_funcs)
      const decls = typeof body === "string" ? { [body]: [] } : body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : undefined;
      if (!decls) {
        errors.push(`ID ${id} in SLS ${sls} is not a dictionary`);
        continue;
      }
      for (const [decl, argsRaw] of Object.entries(decls)) {
        const args = Array.isArray(argsRaw) ? argsRaw : [];
        // `test.nop: [...]`, or `test: [nop, ...]` (the function as the first string of the list)
        const [mod, fun = String(args.find((a) => typeof a === "string") ?? "")] = decl.split(".");
        const kw: Record<string, unknown> = Object.assign({}, ...args.filter((a) => a !== null && typeof a === "object" && !Array.isArray(a)));
        const name = kw.name !== undefined ? String(kw.name) : id;
        const r = mod === "test" ? testState(fun, kw.comment === undefined ? undefined : String(kw.comment), test) : undefined;
        const [key, entry] = stateEntry(mod!, sls, id, name, fun, runNum++, r ?? { changes: {}, result: false, comment: `State '${mod}.${fun}' was not found in SLS '${sls}' (the in-repo test minion runs test.* states only)` });
        out[key] = entry;
      }
    }
  }
  if (errors.length) {
    ctx.retcode = 1;
    return errors;
  }
  if (Object.values(out).some((x) => x.result === false)) ctx.retcode = 2;
  return out;
}

/** Salt stamps (`_stamp`): UTC ISO 8601 with microseconds, no zone. */
export function saltStamp(ms = Date.now()): string {
  return new Date(ms).toISOString().replace("Z", "000");
}

export class FunctionRunner {
  /** jid → proc record of each job running now (what saltutil.find_job reads) */
  readonly running = new Map<string, ProcRecord>();
  private nextPid: number;

  constructor(
    private readonly self: MinionSelf,
    private readonly opts: { cmdRun?: CmdRunStandIn; timer?: CoarseTimer; signal?: () => AbortSignal | undefined; masterFile?: MasterFile } = {},
  ) {
    this.nextPid = 10_000 + Math.floor(Math.random() * 20_000);
  }

  /** Names of the functions this minion has. */
  static readonly functions = [
    "test.ping",
    "test.echo",
    "test.sleep",
    "test.arg",
    "test.version",
    "test.retcode",
    "saltutil.find_job",
    "saltutil.running",
    "grains.items",
    "grains.get",
    "pillar.items",
    "cmd.run",
    "sys.list_functions",
    "state.sls",
    "state.highstate",
    "state.apply",
    "cp.recv",
    "cp.recv_chunked",
  ] as const;

  private sleep(ms: number): Promise<void> {
    return (this.opts.timer ?? sharedTimer).sleep(ms, this.opts.signal?.());
  }

  private async call(fun: string, arg: readonly WireValue[], ctx: { retcode: number }): Promise<unknown> {
    const { args, kwargs } = splitArgs(arg);
    const a0 = args[0] ?? kwargs[Object.keys(kwargs)[0] ?? ""];
    switch (fun) {
      case "test.ping":
        return true;
      case "test.echo":
        return args.length ? args[0] : (kwargs.text ?? "");
      case "test.sleep": {
        const secs = Number(args[0] ?? kwargs.length);
        if (!Number.isFinite(secs) || secs < 0) throw new FunctionError(`Passed invalid arguments: could not convert string to float: '${String(a0)}'`);
        await this.sleep(secs * 1000);
        return true;
      }
      case "test.arg": {
        const clean: Record<string, unknown> = {};
        for (const [k, v] of Object.entries(kwargs)) if (!k.startsWith("__")) clean[k] = v;
        return { args, kwargs: clean };
      }
      case "test.version":
        return this.self.version;
      case "test.retcode": {
        const code = Number(args[0] ?? kwargs.code ?? 0);
        ctx.retcode = Number.isInteger(code) ? code : 0;
        return true;
      }
      case "saltutil.find_job": {
        const jid = String(args[0] ?? kwargs.jid ?? "");
        const rec = this.running.get(jid);
        return rec ? { ...rec } : {};
      }
      case "saltutil.running":
        return [...this.running.values()].map((r) => ({ ...r }));
      case "grains.items":
        return this.self.grains;
      case "grains.get": {
        let v: unknown = this.self.grains;
        for (const part of String(args[0] ?? kwargs.key ?? "").split(":")) {
          v = v !== null && typeof v === "object" ? (v as Record<string, unknown>)[part] : undefined;
        }
        return v ?? args[1] ?? kwargs.default ?? "";
      }
      case "pillar.items":
        return this.self.pillar ?? {};
      case "cmd.run": {
        const cmd = String(args[0] ?? kwargs.cmd ?? "");
        const r = (this.opts.cmdRun ?? defaultCmdRun)(cmd, this.self);
        if (r.delayMs) await this.sleep(r.delayMs);
        ctx.retcode = r.retcode ?? 0;
        return r.stdout;
      }
      case "sys.list_functions":
        return [...FunctionRunner.functions];
      case "state.sls":
      case "state.highstate": {
        const mods = fun === "state.highstate" ? ["highstate"] : String(args[0] ?? kwargs.mods ?? "").split(",").map((m) => m.trim()).filter(Boolean);
        const r = standInStateRun(mods, kwargs.test === true);
        if (Object.values(r).some((x) => x.result === false)) ctx.retcode = 2;
        return r;
      }
      case "state.apply": {
        if (!this.opts.masterFile) throw new FunctionError("'state.apply' is not available.");
        const mods = String(args[0] ?? kwargs.mods ?? "").split(",").map((m) => m.trim()).filter(Boolean);
        if (!mods.length) throw new FunctionError("state.apply without mods (a highstate) is not implemented by the in-repo test minion: name the SLS");
        return applyFromMaster(mods, String(kwargs.saltenv ?? "base"), kwargs.test === true, this.opts.masterFile, ctx);
      }
      case "cp.recv":
        return cpRecv(args[0], String(args[1] ?? kwargs.dest ?? ""));
      case "cp.recv_chunked":
        return cpRecvChunked(args, kwargs, ctx);
      default:
        throw new FunctionError(`'${fun}' is not available.`);
    }
  }

  /** Run one function as Salt's _thread_return does: never throws; failures become the return value. */
  private async one(fun: string, arg: readonly WireValue[]): Promise<{ ret: unknown; retcode: number; success: boolean; out?: string }> {
    const ctx = { retcode: 0 };
    try {
      const ret = await this.call(fun, arg, ctx);
      // a real minion names the function's outputter (its module's __outputter__): state runs print as highstate
      const out = fun.startsWith("state.") ? "highstate" : undefined;
      return { ret, retcode: ctx.retcode, success: ctx.retcode === 0, ...(out ? { out } : {}) };
    } catch (e) {
      if (e instanceof FunctionError) return { ret: e.message, retcode: 1, success: false, out: "nested" };
      if (this.opts.signal?.()?.aborted) throw e;
      return { ret: `ERROR executing '${fun}': ${(e as Error).message}`, retcode: 1, success: false, out: "nested" };
    }
  }

  /** Execute a job (single or multi-function) with its proc record in the running table. */
  async run(load: PublishLoad): Promise<JobOutcome> {
    const rec: ProcRecord = {
      jid: load.jid,
      fun: load.fun,
      arg: load.arg,
      pid: this.nextPid++,
      tgt: load.tgt,
      tgt_type: load.tgt_type ?? "glob",
      ret: load.ret ?? "",
      user: load.user ?? "root",
    };
    this.running.set(load.jid, rec);
    try {
      if (Array.isArray(load.fun)) {
        const ret: Record<string, unknown> = {};
        const retcode: Record<string, number> = {};
        const success: Record<string, boolean> = {};
        for (let i = 0; i < load.fun.length; i++) {
          const f = load.fun[i]!;
          const a = Array.isArray(load.arg[i]) ? (load.arg[i] as WireValue[]) : [];
          const r = await this.one(f, a);
          ret[f] = r.ret;
          retcode[f] = r.retcode;
          success[f] = r.success;
        }
        return { return: ret, retcode, success };
      }
      const r = await this.one(load.fun, load.arg);
      return { return: r.ret, retcode: r.retcode, success: r.success, out: r.out };
    } finally {
      this.running.delete(load.jid);
    }
  }
}

const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();

/** Salt's cp.recv (salt-cp without --chunked): write each {path: text} at dest (a directory or a file name). */
function cpRecv(files: unknown, dest: string): unknown {
  const ret: Record<string, boolean> = {};
  for (const [p, data] of Object.entries((files ?? {}) as Record<string, unknown>)) {
    let final: string;
    if (path.basename(p) === path.basename(dest) && !isDir(dest)) final = dest;
    else if (isDir(dest)) final = path.join(dest, path.basename(p));
    else if (isDir(path.dirname(dest))) final = dest;
    else return "Destination unavailable";
    try {
      writeFileSync(final, Buffer.isBuffer(data) ? data : String(data));
      ret[final] = true;
    } catch {
      ret[final] = false;
    }
  }
  return ret;
}

/** Salt's cp.recv_chunked (salt-cp --chunked): one base64 chunk, gzipped or not, written or appended at dest. */
function cpRecvChunked(args: unknown[], kwargs: Record<string, unknown>, ctx: { retcode: number }): unknown {
  const [dest, chunk, append = kwargs.append ?? false, compressed = kwargs.compressed ?? true, mode = kwargs.mode ?? null] = args as [string, unknown, unknown, unknown, unknown];
  const error = (m: string) => {
    ctx.retcode = 1;
    return m;
  };
  if (chunk === null || chunk === undefined) {
    if (existsSync(dest)) return isDir(dest) ? true : "Path exists and is a file";
    try {
      mkdirSync(dest, { recursive: true });
    } catch (e) {
      return error((e as Error).message);
    }
    return true;
  }
  let data = Buffer.from(Buffer.isBuffer(chunk) ? chunk.toString("latin1") : String(chunk), "base64");
  try {
    if (compressed) data = gunzipSync(data);
    if (!isDir(path.dirname(dest))) mkdirSync(path.dirname(dest), { recursive: true });
    if (append) appendFileSync(dest, data);
    else writeFileSync(dest, data);
    if (!append && typeof mode === "number") chmodSync(dest, mode);
  } catch (e) {
    return error((e as Error).message);
  }
  return true;
}

/**
 * The `_return` load, in a Salt minion's key order: cmd, id, success, return, retcode, jid, fun, fun_args,
 * then user / master_id / metadata when published, out when set, _stamp.
 */
export function returnLoad(id: string, load: PublishLoad, outcome: JobOutcome, stampMs = Date.now()): Record<string, unknown> {
  const r: Record<string, unknown> = {
    cmd: "_return",
    id,
    success: outcome.success,
    return: outcome.return,
    retcode: outcome.retcode,
    jid: load.jid,
    fun: load.fun,
    fun_args: load.arg,
  };
  if (load.user !== undefined) r.user = load.user;
  if (load.master_id !== undefined) r.master_id = load.master_id;
  if (load.metadata !== undefined && load.metadata !== null && typeof load.metadata === "object" && !Array.isArray(load.metadata)) r.metadata = load.metadata;
  if (outcome.out !== undefined) r.out = outcome.out;
  r._stamp = saltStamp(stampMs);
  return r;
}
