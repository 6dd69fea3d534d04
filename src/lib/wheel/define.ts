/**
 * How this directory declares a wheel function: the contract's WheelFunction plus what Salt's argument
 * errors print (the Python module and function name, how many leading parameters have no default).
 */
import type { WheelContext, WheelFunction } from "./types.js";

export interface SaltWheelFunction extends WheelFunction {
  /** how many of `params` (the first ones) have no default */
  readonly required: number;
  /** Salt's Python function name (`list_` for key.list, `key_str` for key.print) */
  readonly pyName: string;
  /** Salt's loaded module name, e.g. salt.loaded.int.wheel.key */
  readonly pyModule: string;
}

/** One module's functions, keyed by Salt's wheel name ("key.list_all"). */
export function wheelModule(
  module: string,
  funs: Record<string, { params: readonly string[]; required?: number; pyName?: string; run(ctx: WheelContext, kw: Record<string, unknown>): unknown }>,
): Map<string, SaltWheelFunction> {
  const out = new Map<string, SaltWheelFunction>();
  for (const [name, f] of Object.entries(funs)) {
    out.set(`${module}.${name}`, {
      params: f.params,
      required: f.required ?? 0,
      pyName: f.pyName ?? name,
      pyModule: `salt.loaded.int.wheel.${module}`,
      run: f.run,
    });
  }
  return out;
}
