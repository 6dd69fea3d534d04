/**
 * The wheel functions brine provides (Salt's salt/wheel/*.py, by Salt's names) and `callWheel`, which runs
 * one as Salt's WheelClient does for the `wheel` clear command and the HTTP API's `wheel` client, after the
 * caller has authorised it:
 *
 * - arguments: `arg` fills the function's parameters in order, then `kwarg` by name (Salt's format_call);
 *   kwarg keys Salt's clients add themselves (CLIENT_INTERNAL_KEYWORDS: client, cmd, eauth, fun, kwarg,
 *   match, token, username, password, full_return, print_event, __jid__, __tag__, __user__) are ignored
 *   unless they name a parameter, so the caller may pass a clear load's top-level keys as `kwarg` once it
 *   has taken out its own (the root `key`, `user`, `arg`); any other unknown key fails the call with
 *   Salt's "'x' is an invalid keyword argument for 'salt.loaded.int.wheel.key.accept'";
 * - a missing required parameter: Salt's "accept takes at least 1 argument (0 given)";
 * - too many positional arguments or a parameter given twice: Python's TypeError text (Salt answers those
 *   with success true and a usage text; brine fails the call, which is what a client can act on);
 * - an unknown function: CommandExecutionError "'key.foo' is not available.";
 * - anything thrown: `{return: "Exception occurred in wheel <fun>: <Class>: <message>", success: false}`
 *   (master.py ClearFuncs.wheel's text; Salt's client puts a Python traceback where brine puts Class: message).
 */
import type { WheelContext, WheelFunction } from "./types.js";
import type { SaltWheelFunction } from "./define.js";
import { KEY_FUNCTIONS } from "./key.js";
import { CONFIG_FUNCTIONS } from "./config.js";
import { MINIONS_FUNCTIONS } from "./minions.js";
import { FILE_ROOTS_FUNCTIONS, PILLAR_ROOTS_FUNCTIONS } from "./file-roots.js";
import { CommandExecutionError, PyTypeError, SaltInvocationError } from "./salt-errors.js";

export type { WheelContext, WheelFunction } from "./types.js";

const ALL = new Map<string, SaltWheelFunction>([...KEY_FUNCTIONS, ...CONFIG_FUNCTIONS, ...MINIONS_FUNCTIONS, ...FILE_ROOTS_FUNCTIONS, ...PILLAR_ROOTS_FUNCTIONS]);

/** Every wheel function brine has, keyed by Salt's name ("key.list_all"). */
export const WHEEL_FUNCTIONS: ReadonlyMap<string, WheelFunction> = ALL;

/** Salt's CLIENT_INTERNAL_KEYWORDS (salt/client/mixins.py), plus the `__kwarg__` marker of Salt's arg lists. */
export const CLIENT_INTERNAL_KEYWORDS: ReadonlySet<string> = new Set([
  "client", "cmd", "eauth", "fun", "kwarg", "match", "token", "__jid__", "__tag__", "__user__", "username", "password",
  "full_return", "print_event", "__kwarg__",
]);

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Salt's format_call over positional and keyword arguments: the keyword arguments the function runs with. */
export function formatCall(f: SaltWheelFunction, arg: unknown, kwarg: unknown): Record<string, unknown> {
  if (!Array.isArray(arg)) throw new SaltInvocationError("arg must be formatted as a list/tuple");
  if (typeof kwarg !== "object" || kwarg === null || Array.isArray(kwarg)) throw new SaltInvocationError("kwarg must be formatted as a dictionary");
  const n = f.params.length;
  if (arg.length > n) {
    const takes = f.required === n ? plural(n, "positional argument") : `from ${f.required} to ${n} positional arguments`;
    throw new PyTypeError(`${f.pyName}() takes ${takes} but ${arg.length} ${arg.length === 1 ? "was" : "were"} given`);
  }
  const out: Record<string, unknown> = {};
  arg.forEach((v, i) => (out[f.params[i]] = v));
  const extra: string[] = [];
  for (const [k, v] of Object.entries(kwarg as Record<string, unknown>)) {
    if (f.params.includes(k)) {
      if (Object.hasOwn(out, k)) throw new PyTypeError(`${f.pyName}() got multiple values for argument '${k}'`);
      out[k] = v;
    } else if (!CLIENT_INTERNAL_KEYWORDS.has(k)) {
      extra.push(k);
    }
  }
  const missing = f.params.slice(0, f.required).filter((p) => !Object.hasOwn(out, p));
  if (missing.length) {
    const given = f.required - missing.length;
    throw new SaltInvocationError(`${f.pyName} takes at least ${plural(f.required, "argument")} (${given} given)`);
  }
  if (extra.length) {
    const where = `${f.pyModule}.${f.pyName}`;
    throw new SaltInvocationError(
      extra.length === 1
        ? `'${extra[0]}' is an invalid keyword argument for '${where}'`
        : `${extra.slice(0, -1).map((e) => `'${e}'`).join(", ")} and '${extra[extra.length - 1]}' are invalid keyword arguments for '${where}'`,
    );
  }
  return out;
}

function className(e: unknown): string {
  return e instanceof Error ? e.name : "Exception";
}

/** Runs wheel function `fun` (after authorization) and answers as Salt's wheel client does. */
export async function callWheel(ctx: WheelContext, fun: string, arg: unknown[], kwarg: Record<string, unknown>): Promise<{ return: unknown; success: boolean }> {
  try {
    if (typeof fun !== "string" || fun === "") throw new SaltInvocationError("Must specify a function to run!\nex: manage.up");
    const f = ALL.get(fun);
    if (!f) throw new CommandExecutionError(`'${fun}' is not available.`);
    return { return: await f.run(ctx, formatCall(f, arg, kwarg)), success: true };
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    return { return: `Exception occurred in wheel ${String(fun)}: ${className(e)}: ${msg}`, success: false };
  }
}
