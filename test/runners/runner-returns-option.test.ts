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

test("a runner's stored return reads back as its caller got it (stored as the caller's msgpack bytes)", async () => {
  const tm = await startTestMaster();
  try {
    const kwarg = { nested: { list: [1, 2.5, "three", null, true], big: 2 ** 40 }, text: "é\n" };
    const called = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: ["a", 7], kwarg });
    assert.equal(called.type, "return");
    const listed = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: { search_function: "runner.test.arg" } });
    const jids = Object.keys((listed as { ret: Record<string, unknown> }).ret);
    assert.equal(jids.length, 1);
    const looked = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: [jids[0]!], kwarg: {} });
    assert.deepEqual((looked as { ret: Record<string, unknown> }).ret, { [tm.cfg.id]: (called as { ret: unknown }).ret });
    assert.deepEqual((called as { ret: unknown }).ret, { args: ["a", 7], kwargs: kwarg });
  } finally {
    await tm.stop();
  }
});
