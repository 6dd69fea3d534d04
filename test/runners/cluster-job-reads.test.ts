/**
 * The jobs.* runners that learn which jids they need only while they run (jobs.last_run, jobs.active) read the
 * cluster's copies when jobs are placed on a ring (src/runners/cluster-jobs.ts): this master's job cache is
 * empty, the jobs live on other masters (a fake Raft client answers the placement reads as they would), and
 * the runners still find them, with their returns.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { jobsFor } from "../../src/runners/cluster-jobs.js";
import { jobsRunners } from "../../src/runners/jobs.js";
import type { RunnerCluster } from "../../src/runners/context.js";
import type { JobCopy } from "../../src/shared/placement.js";
import type { ClusterJob, ClusterJobList } from "../../src/workers/raft/job-placement.js";
import { runnerHarness } from "./helpers.js";
import { EncodedReturn } from "../../src/runners/context.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";

const OLD = "20261125100000000001";
const NEW = "20261125110000000002";
/** what the other masters hold (this master holds nothing) */
const ELSEWHERE: Record<string, JobCopy> = {
  [OLD]: { load: { fun: "test.ping", tgt: "*", arg: [] }, minions: ["a"], returns: { a: { return: true } } },
  [NEW]: { load: { fun: "state.apply", tgt: "web*", arg: [] }, minions: ["a", "b"], returns: { a: { return: { ok: 1 }, retcode: 0 }, b: { return: {}, retcode: 2 } } },
};

function placed(reads: string[], asked: number[] = []): RunnerCluster {
  return {
    nodeId: "m3",
    ring: { route: (dt: string) => (dt === "jobs" ? "jobs" : null) },
    raft: {
      jobRead: async (jid: string): Promise<ClusterJob> => {
        reads.push(jid);
        return { job: ELSEWHERE[jid] ?? { returns: {} }, unreachable: {} };
      },
      // the newest `max` (as every master's list merged is cut: job-placement.ts clusterList)
      jobList: async (max: number): Promise<ClusterJobList> => {
        asked.push(max);
        const all = Object.entries(ELSEWHERE).map(([jid, j]): ClusterJobList["jobs"][number] => [jid, j.load!, j.minions ?? null, null]);
        return { jobs: all.slice(-max), unreachable: {}, ...(all.length > max ? { truncated: true as const } : {}) };
      },
    },
  } as unknown as RunnerCluster;
}

test("jobs.last_run finds the newest job on the other masters, with its returns, when jobs are placed on a ring", async () => {
  const h = runnerHarness();
  try {
    const reads: string[] = [];
    h.ctx.store = h.store;
    h.ctx.cluster = placed(reads);
    const call = async (kwarg: Record<string, unknown>) => {
      const jobs = await jobsFor(h.ctx, "jobs.last_run", [], kwarg);
      return (await jobsRunners["jobs.last_run"]!({ ...h.ctx, jobs }, [], kwarg)) as Record<string, Record<string, unknown>> | false;
    };
    const last = await call({});
    assert.ok(last, "a job was found");
    assert.deepEqual(Object.keys(last), [NEW]);
    assert.equal(last[NEW]!.Function, "state.apply");
    assert.deepEqual(Object.keys(last[NEW]!.Result as object).sort(), ["a", "b"], "the returns held elsewhere are in Result");
    assert.deepEqual(reads, [NEW], "only the newest match's whole copy was fetched");

    const byFun = await call({ function: "test.ping" });
    assert.ok(byFun);
    assert.deepEqual((byFun[OLD]!.Result as Record<string, unknown>).a, { return: true });
    assert.equal(await call({ target: "nomatch" }), false);

    // without the cluster view (what the runner read before): this master's empty cache finds nothing
    assert.equal(await jobsRunners["jobs.last_run"]!(h.ctx, [], {}), false);
  } finally {
    await h.close();
  }
});

test("jobs.active lists what the minions run with the returns already held on other masters", async () => {
  const h = runnerHarness({
    answers: () => [
      { id: "a", data: { return: [{ jid: NEW, fun: "state.apply", pid: 41, tgt: "web*", arg: [] }] } },
      { id: "b", data: { return: [{ jid: NEW, fun: "state.apply", pid: 42, tgt: "web*", arg: [] }] } },
    ],
  });
  try {
    const reads: string[] = [];
    h.ctx.store = h.store;
    h.ctx.cluster = placed(reads);
    const jobs = await jobsFor(h.ctx, "jobs.active", [], {});
    const out = (await jobsRunners["jobs.active"]!({ ...h.ctx, jobs }, [], {})) as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(out), [NEW]);
    assert.deepEqual(out[NEW]!.Running, [{ a: 41 }, { b: 42 }]);
    assert.deepEqual(out[NEW]!.Returned, ["a", "b"], "returns stored on other masters count as returned");
    assert.deepEqual(reads, [NEW]);
  } finally {
    await h.close();
  }
});

test("a cluster-wide jobs.list_jobs asks for brine_cluster_list_jobs_max jobs and, when the cluster holds more, says so on the output and in the log", async () => {
  const h = runnerHarness({ cfg: { brine_cluster_list_jobs_max: 1 } });
  try {
    const asked: number[] = [];
    h.ctx.store = h.store;
    h.ctx.cluster = placed([], asked);
    const jobs = await jobsFor(h.ctx, "jobs.list_jobs", [], {});
    const out = await jobsRunners["jobs.list_jobs"]!({ ...h.ctx, jobs }, [], {});
    const listed = decodeWire((out as EncodedReturn).bytes) as Record<string, unknown>;
    assert.deepEqual(Object.keys(listed), [NEW], "the newest job only");
    assert.deepEqual(asked, [1]);
    assert.equal(h.printed.length, 1);
    assert.match(h.printed[0]!, /^WARNING: jobs\.list_jobs: the cluster holds more than 1 jobs \(brine_cluster_list_jobs_max\): only the newest 1 were read/);

    // under the bound: no warning
    h.ctx.cfg = { ...h.ctx.cfg, brine_cluster_list_jobs_max: 2 };
    h.printed.length = 0;
    const all = await jobsFor(h.ctx, "jobs.list_jobs", [], {});
    assert.deepEqual(Object.keys(decodeWire(((await jobsRunners["jobs.list_jobs"]!({ ...h.ctx, jobs: all }, [], {})) as EncodedReturn).bytes) as object), [OLD, NEW]);
    assert.deepEqual(h.printed, []);
  } finally {
    await h.close();
  }
});
