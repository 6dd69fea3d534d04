/**
 * A read-only jobs.* call that ended well leaves its runner thread warm (registry of kept-warm runners in
 * src/runners/messages.ts): the next such call runs in it, with its own arguments and its own job record, without a
 * thread's start; any other runner still gets a thread of its own; stop ends the warm thread. A call that comes while
 * the warm thread is still writing the last call's record waits for it (warmHandoffWaitMs): back-to-back calls
 * start no thread each. A warm thread is sent the master's configuration once (messages.ts RunnerCall).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Worker } from "node:worker_threads";
import { controlCall } from "../../src/lib/client/control-client.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { startTestMaster } from "../helpers/master.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

type Control = { warm: Worker | undefined; spare: Worker | undefined; spareLoaded: boolean; running: number; threadsStarted: number };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test("jobs.lookup_jid calls run one after another in the same warm thread, each with its own answer and job record, and stop ends it", async () => {
  const tm = await startTestMaster();
  const control = (tm.server as unknown as { control: Control }).control;
  const store = openStore(tm.cfg);
  const jobs = new JobCache(store);
  let warm: Worker | undefined;
  try {
    // jobs of the last minute: keep_jobs (24 h) hides older ones once the first cleanup has run
    const jids = [formatJid(Date.now() - 60_000, 1), formatJid(Date.now() - 60_000, 2)];
    for (const [i, jid] of jids.entries()) {
      await jobs.saveLoad(jid, { fun: "test.echo", tgt: "*", jid });
      await jobs.saveReturn(jid, "m1", { return: `answer ${i}` }, false);
    }
    const lookup = async (jid: string) => {
      const r = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: [jid], kwarg: {} });
      assert.equal(r.type, "return", JSON.stringify(r));
      // kept once its job record is committed, a moment after the caller is answered
      for (let t = 0; t < 200 && (control.running > 0 || !control.warm); t++) await sleep(25);
      return (r as { ret: unknown }).ret;
    };
    assert.deepEqual(await lookup(jids[0]!), { m1: "answer 0" });
    warm = control.warm;
    assert.ok(warm, "the thread of a jobs.lookup_jid call that ended well is kept");
    const exited = new Promise<number>((r) => warm!.once("exit", r));
    assert.deepEqual(await lookup(jids[1]!), { m1: "answer 1" });
    assert.equal(control.warm, warm, "the second call ran in the warm thread, which is kept again");
    assert.deepEqual(await lookup("20000101000000000000"), {}, "a job this master does not have");
    assert.equal(control.warm, warm);
    // another runner gets a thread of its own: the warm one is neither taken nor ended
    const arg = await controlCall(tm.sockDir, { op: "run", fun: "test.arg", arg: ["x"], kwarg: {} });
    assert.deepEqual((arg as { ret: unknown }).ret, { args: ["x"], kwargs: {} });
    assert.equal(control.warm, warm);
    // each call stored its own job record (runner jobs are jobs, as Salt stores them)
    await sleep(100);
    const runnerJobs = jobs.listJids().filter((jid) => jobs.getLoad(jid)?.fun === "runner.jobs.lookup_jid");
    assert.equal(runnerJobs.length, 3, `runner job records: ${runnerJobs.join(",")}`);
    await tm.stop();
    assert.equal(control.warm, undefined, "stop lets go of the warm thread");
    await Promise.race([exited, sleep(5000).then(() => assert.fail("the warm thread did not end at stop"))]);
  } finally {
    await store.close();
    if (control.warm) await tm.stop();
  }
});

test("jobs.lookup_jid calls sent back to back, each as soon as the last was answered, run in one warm thread: no thread starts per call", async () => {
  const tm = await startTestMaster();
  const control = (tm.server as unknown as { control: Control }).control;
  try {
    const call = async () => {
      const r = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: ["20000101000000000000"], kwarg: {} });
      assert.equal(r.type, "return", JSON.stringify(r));
      assert.deepEqual((r as { ret: unknown }).ret, {});
    };
    // the first call makes the thread that is kept warm
    await call();
    for (let t = 0; t < 200 && (control.running > 0 || !control.warm); t++) await sleep(25);
    const started = control.threadsStarted;
    // no pause: each call comes while the last one's thread still writes its job record
    for (let i = 0; i < 20; i++) await call();
    for (let t = 0; t < 200 && control.running > 0; t++) await sleep(25);
    // (the spare the first call took is replaced once: one start at most; before, one per call)
    assert.ok(control.threadsStarted - started <= 1, `threads started for 20 back-to-back calls: ${control.threadsStarted - started}`);
    assert.ok(control.warm, "the thread is still kept warm");
  } finally {
    await tm.stop();
  }
});

test("a warm thread is sent the master's configuration once: its next calls come without it and answer the same, and a call with its own timeout (salt-run -t) brings its own", async () => {
  const tm = await startTestMaster();
  const control = (tm.server as unknown as { control: Control }).control;
  const store = openStore(tm.cfg);
  const jobs = new JobCache(store);
  try {
    const jid = formatJid(Date.now() - 60_000, 3);
    await jobs.saveLoad(jid, { fun: "test.echo", tgt: "*", jid });
    await jobs.saveReturn(jid, "m1", { return: "kept" }, false);
    const lookup = async (timeout?: number) => {
      const r = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: [jid], kwarg: {}, ...(timeout ? { timeout } : {}) });
      assert.equal(r.type, "return", JSON.stringify(r));
      for (let t = 0; t < 200 && (control.running > 0 || !control.warm); t++) await sleep(25);
      return (r as { ret: unknown }).ret;
    };
    assert.deepEqual(await lookup(), { m1: "kept" });
    const warm = control.warm!;
    assert.ok(warm, "the first call's thread is kept warm");
    // what the control server posts to the warm thread from now on
    const sent: { cfg?: { timeout?: unknown } }[] = [];
    const post = warm.postMessage.bind(warm);
    warm.postMessage = (m: unknown, tl?: readonly import("node:worker_threads").Transferable[]) => {
      const msg = m as { k?: string; init?: { cfg?: { timeout?: unknown } } };
      if (msg.k === "init") sent.push(msg.init!);
      return post(m, tl as never);
    };
    assert.deepEqual(await lookup(), { m1: "kept" });
    assert.deepEqual(await lookup(7), { m1: "kept" });
    assert.deepEqual(await lookup(), { m1: "kept" });
    assert.equal(control.warm, warm, "the three calls ran in the warm thread");
    assert.equal(sent.length, 3);
    assert.equal(sent[0]!.cfg, undefined, "the thread has the master's configuration from its first call");
    assert.equal(sent[1]!.cfg?.timeout, 7, "a call with its own timeout brings its configuration");
    assert.equal(sent[2]!.cfg?.timeout, tm.cfg.timeout, "the call after it brings the master's again");
  } finally {
    await store.close();
    await tm.stop();
  }
});
