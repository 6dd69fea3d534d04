/**
 * Python-style arguments for functions called from templates. nunjucks passes keyword arguments as a
 * trailing object marked `__keywords`; these helpers split them off and bind parameters by name.
 */
export type Kwargs = Record<string, unknown>;

export function isKwargs(v: unknown): v is Kwargs {
  return typeof v === "object" && v !== null && Object.prototype.hasOwnProperty.call(v, "__keywords");
}

/** Positional arguments (trailing undefined dropped) and keyword arguments (without the marker). */
export function kwargsOf(args: readonly unknown[]): { args: unknown[]; kwargs: Kwargs } {
  const a = [...args];
  while (a.length && a[a.length - 1] === undefined) a.pop();
  let kwargs: Kwargs = {};
  if (a.length && isKwargs(a[a.length - 1])) {
    const { __keywords: _k, ...rest } = a.pop() as Kwargs;
    kwargs = rest;
  }
  return { args: a, kwargs };
}

/**
 * Bind `args` to `names` like a Python signature: positionals first, then keywords; missing names take
 * `defaults[name]`. Unknown keywords are returned in `extra`.
 */
export function bindArgs(args: readonly unknown[], names: readonly string[], defaults: Kwargs = {}): { bound: Kwargs; extra: Kwargs } {
  const { args: pos, kwargs } = kwargsOf(args);
  const bound: Kwargs = { ...defaults };
  names.forEach((n, i) => {
    if (i < pos.length) bound[n] = pos[i];
  });
  const extra: Kwargs = {};
  for (const [k, v] of Object.entries(kwargs)) {
    if (names.includes(k)) bound[k] = v;
    else extra[k] = v;
  }
  return { bound, extra };
}
