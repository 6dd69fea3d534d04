/** manage.* runners: who answers a ping. */
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";
import { clusterPresent } from "../master/presence.js";

async function ping(ctx: RunnerContext, timeoutS: number): Promise<{ up: string[]; down: string[] }> {
  const up = new Set<string>();
  for await (const r of ctx.client.cmdIter({ tgt: "*", fun: "test.ping", timeoutS }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    if (!("missing" in r)) up.add(r.id);
  }
  const accepted = ctx.keys.list("accepted");
  return { up: accepted.filter((m) => up.has(m)), down: accepted.filter((m) => !up.has(m)) };
}

const timeoutOf = (ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>) => Number(argOf(arg, kwarg, 0, "timeout", ctx.cfg.timeout));

/** Minions connected to this master or, clustered, to any master (presence.ts; no job is sent). */
function present(ctx: RunnerContext): string[] {
  return clusterPresent(ctx.cfg, ctx.minions.store, ctx.keys.list("accepted"), (id) => ctx.minions.get(id)?.grains as Record<string, unknown> | undefined);
}

export const manageRunners: Record<string, RunnerFn> = {
  "manage.status": async (ctx, arg, kwarg) => ping(ctx, timeoutOf(ctx, arg, kwarg)),
  "manage.up": async (ctx, arg, kwarg) => (await ping(ctx, timeoutOf(ctx, arg, kwarg))).up,
  "manage.down": async (ctx, arg, kwarg) => (await ping(ctx, timeoutOf(ctx, arg, kwarg))).down,
  "manage.present": async (ctx) => present(ctx),
  "manage.not_present": async (ctx) => {
    const p = new Set(present(ctx));
    return ctx.keys.list("accepted").filter((m) => !p.has(m));
  },
};
