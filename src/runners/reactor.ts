/**
 * reactor.list / reactor.add / reactor.delete (Salt's salt/runners/reactor.py) and schedule.list, answered by the
 * automation thread through the master's control socket (Salt sends `salt/reactors/manage/*` events with the
 * master key over the bus; brine asks the thread directly, over the same 0600 socket salt-run uses). Like Salt,
 * reactor.add and reactor.delete change the running master's map only (not the config file, not other masters
 * of a cluster). reactor.stats (brine): the reactor queue's counters, dropped events included.
 */
import { controlCall } from "../lib/client/control-client.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";

/** Salt's CommandExecutionError text when no reactor runs. */
export const REACTOR_NOT_RUNNING = "Reactor system is not running.";

async function ask(ctx: RunnerContext, req: Record<string, unknown>, notRunning: string): Promise<unknown> {
  const r = await controlCall(ctx.cfg.sock_dir, { op: "automation", req });
  if (r.type === "error") throw new Error(r.message === "automation is not running" ? notRunning : (r.message ?? "error"));
  return r.ret;
}

export const reactorRunners: Record<string, RunnerFn> = {
  "reactor.list": async (ctx) => ask(ctx, { op: "reactor.list" }, REACTOR_NOT_RUNNING),
  "reactor.add": async (ctx, arg, kwarg) => {
    const event = String(argOf(arg, kwarg, 0, "event", ""));
    const r = argOf(arg, kwarg, 1, "reactors", []);
    const reactors = (typeof r === "string" ? [r] : Array.isArray(r) ? r : []).map(String);
    if (!event || reactors.length === 0) throw new Error("reactor.add needs an event (tag glob) and reactors (an sls path or a list)");
    return ask(ctx, { op: "reactor.add", event, reactors }, REACTOR_NOT_RUNNING);
  },
  "reactor.delete": async (ctx, arg, kwarg) => ask(ctx, { op: "reactor.delete", event: String(argOf(arg, kwarg, 0, "event", "")) }, REACTOR_NOT_RUNNING),
  "reactor.stats": async (ctx) => ask(ctx, { op: "reactor.stats" }, REACTOR_NOT_RUNNING),
  "schedule.list": async (ctx) => ask(ctx, { op: "schedule.list" }, "The master schedule is not running (no schedule: in the master config)."),
};
