/** Salt's runner_returns: runner calls are stored in the job cache as jobs unless it is False. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";

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

/** The one job of runner function `fun` jobs.list_jobs lists, and what jobs.lookup_jid answers for it under the master's id. */
async function onlyRunnerJob(tm: TestMaster, fun: string): Promise<{ jid: string; rec: Record<string, unknown> }> {
  const listed = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: { search_function: fun } });
  const jids = Object.keys((listed as { ret: Record<string, unknown> }).ret);
  assert.equal(jids.length, 1);
  const looked = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: [jids[0]!], kwarg: {} });
  return { jid: jids[0]!, rec: (looked as { ret: Record<string, Record<string, unknown>> }).ret[tm.cfg.id]! };
}

test("a runner's stored return reads back as its caller got it (stored as the caller's msgpack bytes), in Salt's record of the call", async () => {
  const tm = await startTestMaster();
  try {
    const kwarg = { nested: { list: [1, 2.5, "three", null, true], big: 2 ** 40 }, text: "é\n" };
    const called = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: ["a", 7], kwarg });
    assert.equal(called.type, "return");
    // Salt 3007's jobs.lookup_jid of a runner job (seen with the Python master): {<master id>: {fun, jid, user, fun_args, _stamp, return, success}}
    const { jid, rec } = await onlyRunnerJob(tm, "runner.test.arg");
    assert.deepEqual(Object.keys(rec), ["fun", "jid", "user", "fun_args", "_stamp", "return", "success"]);
    assert.match(String(rec._stamp), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$/);
    assert.deepEqual({ ...rec, _stamp: "" }, { fun: "runner.test.arg", jid, user: tm.cfg.user, fun_args: ["a", 7, kwarg], _stamp: "", return: (called as { ret: unknown }).ret, success: true });
    assert.deepEqual((called as { ret: unknown }).ret, { args: ["a", 7], kwargs: kwarg });
  } finally {
    await tm.stop();
  }
});

test("a runner that fails is stored as Salt stores it: success False and retcode 1, the error as its return", async () => {
  const tm = await startTestMaster();
  try {
    const called = await controlCall(tm.sockDir, { op: "run", fun: "test.sleep", arg: ["-1"], kwarg: {} });
    assert.equal(called.type, "error");
    const { rec } = await onlyRunnerJob(tm, "runner.test.sleep");
    assert.deepEqual([rec.fun, rec.success, rec.retcode], ["runner.test.sleep", false, 1]);
    assert.match(String(rec.return), /s_time must be a number of seconds/);
  } finally {
    await tm.stop();
  }
});
