/**
 * The state.* runners: state.event (stream bus events matching a tag glob, as Salt prints them: tag, tab, JSON),
 * and the orchestrate runners (orchestrate/runner.ts, loaded only when one of them runs).
 */
import { fnmatchToRegExp as fnmatchRegex } from "../lib/targeting/index.js";
import { argOf, type RunnerFn } from "./context.js";

function toJson(v: unknown, pretty: boolean): string {
  return JSON.stringify(
    v,
    (_k, x) => (typeof x === "bigint" ? x.toString() : x && x.type === "Buffer" && Array.isArray(x.data) ? Buffer.from(x.data).toString("latin1") : x),
    pretty ? 4 : undefined,
  );
}

const event: RunnerFn = async (ctx, arg, kwarg) => {
  const tagmatch = String(argOf(arg, kwarg, 0, "tagmatch", "*"));
  const count = Number(argOf(arg, kwarg, 1, "count", -1));
  const quiet = argOf(arg, kwarg, 2, "quiet", false) === true;
  const pretty = argOf(arg, kwarg, 4, "pretty", false) === true;
  const re = fnmatchRegex(tagmatch);
  let n = 0;
  for await (const e of ctx.events()) {
    if (!re.test(e.tag)) continue;
    if (!quiet) ctx.print(`${e.tag}\t${toJson(e.data, pretty)}`);
    n++;
    if (count > 0 && n >= count) break;
  }
  return true;
};

const orchestration =
  (name: string): RunnerFn =>
  async (ctx, arg, kwarg) =>
    (await import("./orchestrate/runner.js")).orchestrateRunners[name]!(ctx, arg, kwarg);

export const stateRunners: Record<string, RunnerFn> = {
  "state.event": event,
  "state.orchestrate": orchestration("state.orchestrate"),
  "state.orch": orchestration("state.orch"),
  "state.sls": orchestration("state.sls"),
  "state.orchestrate_single": orchestration("state.orchestrate_single"),
  "state.orchestrate_high": orchestration("state.orchestrate_high"),
  "state.orchestrate_show_sls": orchestration("state.orchestrate_show_sls"),
  "state.orch_show_sls": orchestration("state.orch_show_sls"),
};
