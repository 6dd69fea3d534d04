/**
 * After a runner call the control server keeps one runner thread loaded ahead of the next call (its modules take
 * about a quarter of a second to load, and it opens the job cache), hands the next call to it as its first message,
 * and ends it at stop.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Worker } from "node:worker_threads";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster } from "../helpers/master.js";

test("the call after the first runs in the spare thread started before it, with its own arguments, and a new spare follows", async () => {
  const tm = await startTestMaster();
  const control = (tm.server as unknown as { control: { spare: Worker | undefined; spareLoaded: boolean } }).control;
  try {
    assert.equal(control.spare, undefined, "no spare before any runner call");
    const first = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: ["one"], kwarg: {} });
    assert.deepEqual((first as { ret: unknown }).ret, { args: ["one"], kwargs: {} });
    // the spare starts once the call is over (its record committed), a moment after its caller was answered
    for (let t = 0; t < 100 && !control.spare; t++) await new Promise((r) => setTimeout(r, 50));
    const spare = control.spare;
    assert.ok(spare, "a spare is started after a call");
    // it says when it has loaded and warmed up (its modules, the job cache, the jobs.* reads)
    for (let t = 0; t < 300 && !control.spareLoaded; t++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(control.spareLoaded, true, "the spare said it had loaded");
    const second = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: ["two", 2], kwarg: { k: "v" } });
    assert.deepEqual((second as { ret: unknown }).ret, { args: ["two", 2], kwargs: { k: "v" } });
    assert.notEqual(control.spare, spare, "the spare took the call and a new one was started");
    const unknown = await controlCall(tm.sockDir, { op: "run", fun: "no.such_runner", arg: [], kwarg: {} });
    assert.equal(unknown.type, "error");
  } finally {
    await tm.stop();
  }
  assert.equal(control.spare, undefined, "stop ends the spare");
});
