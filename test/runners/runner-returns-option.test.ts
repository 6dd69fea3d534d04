/** Salt's runner_returns: runner calls are stored in the job cache as jobs unless it is False. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster } from "../helpers/master.js";

for (const runnerReturns of [true, false]) {
  test(`runner_returns: ${runnerReturns ? "True (the default) stores a runner call as a job" : "False keeps runner calls out of the job cache"}`, async () => {
    const tm = await startTestMaster(runnerReturns ? {} : { runner_returns: false });
    try {
      const first = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: {} });
      assert.equal(first.type, "return");
      const second = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: {} });
      assert.equal(second.type, "return");
      const jobs = Object.values((second as { ret: Record<string, { Function: string }> }).ret);
      assert.equal(jobs.filter((j) => j.Function === "runner.jobs.list_jobs").length, runnerReturns ? 1 : 0);
    } finally {
      await tm.stop();
    }
  });
}
