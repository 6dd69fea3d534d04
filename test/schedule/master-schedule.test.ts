/**
 * The master schedule end to end: a runner every 2 s lands in jobs.list_jobs with its jid (as Salt's
 * RunnerClient stores runner jobs: target the master, tgt_type list) and fires salt/run/<jid>/new|ret and
 * Salt's `__schedule_return`; a cron job (croner, seconds field first) fires every second; a `once` job fires
 * once; maxrunning 1 never lets two runs of a slow job overlap; a wheel job is a job too.
 *
 * Compared with the Python master (3007.x, ../shared/real-salt, `every2: {function: test.arg, seconds: 2, args: [a,
 * 1], kwargs: {k: v}}`): every 2 s it fires `__schedule_return` `{cmd: _return, id: <master id>, fun: test.arg,
 * fun_args: [a, 1, {k: v}], jid: req, pid, retcode: 0, return: {args: [a, 1], kwargs: {k: v}}, schedule: every2,
 * success: True}` and nothing else: no salt/run events and no job in jobs.list_jobs. brine fires the same
 * `__schedule_return` (plus `brine_jid`) and also makes each run a runner job (issue #19 asks for it).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventClient } from "../../src/lib/client/event-client.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";

function isoLocal(ms: number): string {
  const d = new Date(ms);
  const p = (n: number) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

test("scheduled runner and wheel jobs: every 2 s in jobs.list_jobs, cron, once, maxrunning", { timeout: 90_000 }, async () => {
  // far enough that the thread is up (on a busy machine it takes seconds), near enough to fire in the window
  const onceAt = Math.ceil((Date.now() + 8000) / 1000) * 1000;
  const tm = await startTestMaster({
    schedule: {
      every2: { function: "test.arg", seconds: 2, args: ["a", 1], kwargs: { k: "v" } },
      cron1: { function: "test.arg", cron: "* * * * * *", args: ["cron"] },
      once1: { function: "test.arg", once: isoLocal(onceAt), args: ["once"] },
      past: { function: "test.arg", once: "2001-01-01T00:00:00", args: ["past"] },
      slow: { function: "test.sleep", seconds: 1, args: [2.5], maxrunning: 1 },
      keys: { function: "wheel.key.list_all", seconds: 3 },
      off: { function: "test.arg", seconds: 1, args: ["off"], enabled: false },
    },
  } as never);
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: (BusEvent & { at: number })[] = [];
  ec.on((e) => events.push({ ...e, at: Date.now() }));
  try {
    // once1's time must still be ahead when the schedule starts (brine plans a `once` time in the past never):
    // a master that took longer than 8 s to start cannot show once1 firing, and says so instead of a count
    const atStart = (await controlCall(tm.sockDir, { op: "automation", req: { op: "schedule.list" } })).ret as Record<string, Record<string, unknown>>;
    assert.ok(atStart.once1!._next_fire_time !== null || atStart.once1!._runs === 1, `the master took more than 8 s to start its schedule (once1: ${JSON.stringify(atStart.once1)})`);
    await new Promise((r) => setTimeout(r, 9_000));
    // fires counted by the schedule itself (run or skipped by maxrunning): a runner thread takes seconds to
    // start on a busy machine, so how many runs completed says nothing about the timer
    const sched9 = (await controlCall(tm.sockDir, { op: "automation", req: { op: "schedule.list" } })).ret as Record<string, Record<string, number>>;
    const fires = (n: string) => sched9[n]!._runs! + sched9[n]!._skips!;
    assert.ok(fires("every2") >= 3 && fires("every2") <= 5, `every2 fired ${fires("every2")} times in 9 s`);
    assert.ok(fires("cron1") >= 7, `cron1 fired ${fires("cron1")} times in 9 s`);
    assert.equal(sched9.off!._runs, 0);
    const runs = (arg0: string) => events.filter((e) => /^salt\/run\/\d{20}\/new$/.test(e.tag) && e.data.fun === "runner.test.arg" && e.data.fun_args?.[0] === arg0);
    // two every2 runs complete and once1's run has started (however slowly: a runner thread takes seconds to
    // start on a busy machine, so once1's salt/run/<jid>/new may come well after its time, which failed a run
    // at load 20 when this waited only one second past it)
    for (let t = 0; t < 600; t++) {
      const done = runs("a").filter((n) => events.some((e) => e.tag === `salt/run/${n.data.jid}/ret`));
      if (done.length >= 2 && Date.now() > onceAt && runs("once").length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const onceFired = (await controlCall(tm.sockDir, { op: "automation", req: { op: "schedule.list" } })).ret as Record<string, Record<string, unknown>>;
    assert.equal(onceFired.once1!._runs, 1, "the schedule fired once1 once");
    assert.equal(onceFired.once1!._next_fire_time, null, "and never again");
    assert.equal(runs("once").length, 1, "once1 ran once");
    assert.equal(runs("past").length, 0, "a once time already past never fires");
    assert.equal(runs("off").length, 0, "a disabled job never runs");

    // every2's runs are jobs with jids, listed by jobs.list_jobs
    const jids = runs("a").map((e) => e.data.jid as string);
    const listed = await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: {} });
    const jobs = listed.ret as Record<string, Record<string, unknown>>;
    const done = jids.filter((j) => events.some((e) => e.tag === `salt/run/${j}/ret`));
    assert.ok(done.length >= 2);
    for (const jid of done) {
      assert.ok(jobs[jid], `${jid} in jobs.list_jobs`);
      assert.equal(jobs[jid]!.Function, "runner.test.arg");
      assert.equal(jobs[jid]!.Target, "test_master");
      assert.equal(jobs[jid]!["Target-type"], "list");
      assert.equal(jobs[jid]!.User, tm.cfg.user);
    }
    const looked = await controlCall(tm.sockDir, { op: "run", fun: "jobs.lookup_jid", arg: [done[0]], kwarg: {} });
    // a runner job's record, as Salt's jobs.lookup_jid answers one: {fun, jid, user, fun_args, _stamp, return, success}
    const rec = (looked.ret as Record<string, Record<string, unknown>>).test_master!;
    assert.deepEqual([rec.fun, rec.jid, rec.return, rec.success], ["runner.test.arg", done[0], { args: ["a", 1], kwargs: { k: "v" } }, true]);
    const sr = events.find((e) => e.tag === "__schedule_return" && e.data.schedule === "every2");
    assert.ok(sr, "__schedule_return fired");
    assert.equal(sr.data.jid, "req");
    assert.equal(sr.data.fun, "test.arg");
    assert.deepEqual(sr.data.fun_args, ["a", 1, { k: "v" }]);
    assert.deepEqual(sr.data.return, { args: ["a", 1], kwargs: { k: "v" } });
    assert.equal(sr.data.success, true);

    // maxrunning 1: a 2.5 s job every second never overlaps itself
    const slow = events.filter((e) => /^salt\/run\/\d{20}\/(new|ret)$/.test(e.tag) && e.data.fun === "runner.test.sleep");
    let running = 0;
    let most = 0;
    for (const e of slow) {
      running += e.tag.endsWith("/new") ? 1 : -1;
      most = Math.max(most, running);
    }
    assert.equal(most, 1, "never two runs of the slow job at once");
    assert.ok(sched9.slow!._skips! >= 1, "fires while the slow job ran were skipped");

    // a wheel job is a job: salt/wheel events and a job cache entry
    const wheelRet = events.find((e) => /^salt\/wheel\/\d{20}\/ret$/.test(e.tag) && e.data.fun === "wheel.key.list_all");
    assert.ok(wheelRet, "the wheel job ran");
    const listed2 = (await controlCall(tm.sockDir, { op: "run", fun: "jobs.list_jobs", arg: [], kwarg: {} })).ret as Record<string, Record<string, unknown>>;
    assert.equal(listed2[wheelRet.data.jid as string]?.Function, "wheel.key.list_all");

    const sched = (await controlCall(tm.sockDir, { op: "run", fun: "schedule.list", arg: [], kwarg: {} })).ret as Record<string, Record<string, unknown>>;
    assert.equal(sched.every2!.function, "test.arg");
    assert.equal(sched.past!._next_fire_time, null);
  } finally {
    ec.close();
    await tm.stop();
  }
});
