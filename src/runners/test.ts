/** Salt's test runners (salt/runners/test.py) that scheduled jobs and reactions use in checks: arg, sleep. */
import { argOf, type RunnerFn } from "./context.js";

export const testRunners: Record<string, RunnerFn> = {
  /** test.arg(*args, **kwargs): {args, kwargs}, keyword arguments starting with `__` left out. */
  "test.arg": async (_ctx, arg, kwarg) => ({ args: arg, kwargs: Object.fromEntries(Object.entries(kwarg).filter(([k]) => !k.startsWith("__"))) }),
  /** test.sleep(s_time=10): prints s_time (as Salt's does), True after s_time seconds. */
  "test.sleep": async (ctx, arg, kwarg) => {
    const given = argOf(arg, kwarg, 0, "s_time", 10);
    ctx.print(String(given));
    const s = Number(given);
    if (!Number.isFinite(s) || s < 0) throw new Error(`s_time must be a number of seconds, got ${JSON.stringify(given)}`);
    await new Promise((r) => setTimeout(r, s * 1000));
    return true;
  },
};
