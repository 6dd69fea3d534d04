/**
 * Command-line job arguments as Salt's CLI conditions them: positional arguments YAML-parsed
 * (`1` → 1, `[a, b]` → list, `foo` stays "foo"), `key=value` words gathered into a trailing
 * `{"__kwarg__": true, key: value}` map (values YAML-parsed too).
 */
import { parse } from "yaml";

const KWARG_RE = /^([A-Za-z_][A-Za-z0-9_.-]*)=(.*)$/s;

function unBig(v: unknown): unknown {
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (Array.isArray(v)) return v.map(unBig);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unBig(x)]));
  return v;
}

export function yamlifyArg(s: string): unknown {
  if (s === "") return s;
  try {
    const v: unknown = parse(s, { intAsBigInt: true });
    // Python keeps big integers exact (jids are 20 digits); JS numbers would round them, so such a
    // word stays text, which is how every runner and module treats a jid anyway.
    if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : s;
    if (v && typeof v === "object") return unBig(v);
    if (v === null && !/^(~|null|Null|NULL|None)$/.test(s.trim())) return s;
    if (v === null && s.trim() === "None") return s;
    if (typeof v === "string" && v !== s.trim()) return s; // quoting or escapes: keep the user's text
    return v;
  } catch {
    return s;
  }
}

/** `noParse`: keyword arguments whose values stay text (Salt's --no-parse). */
export function conditionInput(words: string[], noParse: readonly string[] = []): unknown[] {
  const args: unknown[] = [];
  const kwargs: Record<string, unknown> = {};
  let haveKw = false;
  for (const w of words) {
    const m = KWARG_RE.exec(w);
    if (m && !w.startsWith("=")) {
      kwargs[m[1]!] = noParse.includes(m[1]!) ? m[2]! : yamlifyArg(m[2]!);
      haveKw = true;
    } else args.push(yamlifyArg(w));
  }
  // Salt's condition_input: the marker first, then the keyword arguments in the order given
  if (haveKw) args.push({ __kwarg__: true, ...kwargs });
  return args;
}

/** A runner call's words as salt-run passes them: conditioned (conditionInput), the `key=value` words as kwarg. */
export function runnerInput(words: string[]): { arg: unknown[]; kwarg: Record<string, unknown> } {
  const arg = conditionInput(words);
  const last = arg[arg.length - 1];
  if (!last || typeof last !== "object" || (last as Record<string, unknown>).__kwarg__ !== true) return { arg, kwarg: {} };
  const { __kwarg__: _k, ...kwarg } = last as Record<string, unknown>;
  return { arg: arg.slice(0, -1), kwarg };
}

/**
 * Salt's parse_input (salt/utils/args.py), what the master applies to the arguments a minion publishes
 * (`publish.publish`, `publish.runner`): `key=value` strings become keyword arguments (their values
 * YAML-parsed unless the key is in `noParse`), other strings are YAML-parsed, a `{__kwarg__: True, ...}` map
 * joins the keyword arguments, anything else stays; the keyword arguments come last as one `__kwarg__` map.
 */
export function parseInput(args: readonly unknown[], noParse: readonly unknown[] = []): unknown[] {
  const out: unknown[] = [];
  const kwargs: Record<string, unknown> = {};
  let haveKw = false;
  for (const a of args) {
    if (typeof a === "string") {
      const m = KWARG_RE.exec(a);
      if (m && !a.startsWith("=") && !m[2]!.startsWith("=")) {
        kwargs[m[1]!] = noParse.includes(m[1]!) ? m[2]! : yamlifyArg(m[2]!);
        haveKw = true;
      } else out.push(yamlifyArg(a));
    } else if (a !== null && typeof a === "object" && !Array.isArray(a) && (a as Record<string, unknown>).__kwarg__ === true) {
      const { __kwarg__: _k, ...rest } = a as Record<string, unknown>;
      Object.assign(kwargs, rest);
      haveKw = true;
    } else out.push(a);
  }
  if (haveKw) out.push({ __kwarg__: true, ...kwargs });
  return out;
}
