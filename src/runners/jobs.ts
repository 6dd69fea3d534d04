/** jobs.* runners over the job cache. */
import { jidToTime } from "../protocol/jid.js";
import { argOf, type RunnerFn } from "./context.js";

function formatJob(jid: string, load: Record<string, unknown>): Record<string, unknown> {
  return {
    Function: load.fun ?? "unknown-function",
    Arguments: load.arg ?? [],
    Target: load.tgt ?? "unknown-target",
    "Target-type": load.tgt_type ?? [],
    User: load.user ?? "root",
    StartTime: jidToTime(jid),
  };
}

const listJobs: RunnerFn = async (ctx, arg, kwarg) => {
  const searchFunction = argOf(arg, kwarg, 1, "search_function", undefined);
  const searchTarget = argOf(arg, kwarg, 2, "search_target", undefined);
  const out: Record<string, unknown> = {};
  for (const [jid, load] of ctx.jobs.loads()) {
    if (typeof searchFunction === "string" && !String(load.fun).includes(searchFunction)) continue;
    if (typeof searchTarget === "string" && !String(load.tgt).includes(searchTarget)) continue;
    out[jid] = formatJob(jid, load);
  }
  return out;
};

const lookupJid: RunnerFn = async (ctx, arg, kwarg) => {
  const jid = String(argOf(arg, kwarg, 0, "jid", ""));
  const missing = argOf(arg, kwarg, 2, "missing", false) === true;
  const returns = ctx.jobs.returnsFor(jid);
  const out: Record<string, unknown> = {};
  for (const [id, rec] of Object.entries(returns)) out[id] = rec.return;
  if (missing) {
    for (const id of ctx.jobs.expectedMinions(jid)) if (!(id in out)) out[id] = "Minion did not return";
  }
  return out;
};

const listJob: RunnerFn = async (ctx, arg, kwarg) => {
  const jid = String(argOf(arg, kwarg, 0, "jid", ""));
  const load = ctx.jobs.getLoad(jid);
  if (!load) return {};
  const result: Record<string, unknown> = {};
  for (const [id, rec] of Object.entries(ctx.jobs.returnsFor(jid))) result[id] = { return: rec.return };
  return { jid, ...formatJob(jid, load), Minions: load.Minions, Result: result };
};

/** jobs.active: ask every minion what it is running (saltutil.running) and group by jid. */
const active: RunnerFn = async (ctx, arg, kwarg) => {
  const timeoutS = Number(argOf(arg, kwarg, 0, "timeout", ctx.cfg.timeout));
  const out: Record<string, Record<string, unknown>> = {};
  for await (const r of ctx.client.cmdIter({ tgt: "*", fun: "saltutil.running", timeoutS })) {
    if ("missing" in r) continue;
    const running = r.data.return;
    if (!Array.isArray(running)) continue;
    for (const job of running) {
      if (!job || typeof job !== "object") continue;
      const j = job as Record<string, unknown>;
      const jid = String(j.jid);
      const entry = (out[jid] ??= { ...formatJob(jid, j), Running: [], Returned: [] });
      (entry.Running as unknown[]).push({ [r.id]: j.pid });
    }
  }
  for (const jid of Object.keys(out)) {
    out[jid]!.Returned = Object.keys(ctx.jobs.returnsFor(jid));
  }
  return out;
};

export const jobsRunners: Record<string, RunnerFn> = {
  "jobs.list_jobs": listJobs,
  "jobs.lookup_jid": lookupJid,
  "jobs.list_job": listJob,
  "jobs.active": active,
};
