/**
 * The master schedule's decisions on a fake clock (src/automation/schedule.ts): intervals and run_on_start,
 * 5-field cron at minute boundaries, once, daily `when` times, splay bounds, range and invert, maxrunning,
 * enabled, the cluster owner's veto, and bad entries refused at start naming the option.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { inRange, parseJob, parseTime, Schedule } from "../../src/automation/schedule.js";
import { readAutomationOptions } from "../../src/automation/options.js";
import { isBrineError } from "../../src/shared/errors.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";

const local = (y: number, mo: number, d: number, h: number, mi: number, s = 0) => new Date(y, mo - 1, d, h, mi, s).getTime();
const T0 = local(2026, 3, 10, 12, 0, 30);
const fired = (s: Schedule, now: number) => s.due(now).map((d) => (d.run ? d.job.name : `${d.job.name}:skip`));

test("an interval job fires one interval after start, then every interval; run_on_start fires at start", () => {
  const s = new Schedule([parseJob("a", { function: "test.arg", seconds: 2 }), parseJob("b", { function: "test.arg", minutes: 1, run_on_start: true })], true, T0);
  assert.deepEqual(fired(s, T0), ["b"]);
  assert.equal(s.nextWake(), T0 + 2000);
  assert.deepEqual(fired(s, T0 + 1999), []);
  assert.deepEqual(fired(s, T0 + 2000), ["a"]);
  assert.equal(s.nextWake(), T0 + 4000);
  assert.deepEqual(fired(s, T0 + 60_000), ["a", "b"]);
  assert.equal(s.nextWake(), T0 + 62_000);
});

test("maxrunning (default 1) skips a fire while that many runs are going", () => {
  const s = new Schedule([parseJob("a", { function: "test.sleep", seconds: 1 }), parseJob("b", { function: "test.sleep", seconds: 1, maxrunning: 2 })], true, T0);
  assert.deepEqual(fired(s, T0 + 1000), ["a", "b"]);
  s.started("a");
  s.started("b");
  assert.deepEqual(fired(s, T0 + 2000), ["a:skip", "b"]);
  s.started("b");
  assert.deepEqual(fired(s, T0 + 3000), ["a:skip", "b:skip"]);
  s.finished("a");
  s.finished("b");
  assert.deepEqual(fired(s, T0 + 4000), ["a", "b"]);
  const r = s.due(T0 + 5000).find((d) => d.job.name === "a");
  assert.equal(r?.run, true);
});

test("a 5-field cron expression fires at minute boundaries; once fires once; a past once never", () => {
  const s = new Schedule(
    [parseJob("c", { function: "test.arg", cron: "*/5 * * * *" }), parseJob("o", { function: "test.arg", once: "2026-03-10T12:01:00" }), parseJob("p", { function: "test.arg", once: "2026-03-10T11:00:00" })],
    true,
    T0,
  );
  assert.equal(s.nextWake(), local(2026, 3, 10, 12, 1));
  assert.deepEqual(fired(s, local(2026, 3, 10, 12, 1)), ["o"]);
  assert.equal(s.nextWake(), local(2026, 3, 10, 12, 5));
  assert.deepEqual(fired(s, local(2026, 3, 10, 12, 5)), ["c"]);
  assert.equal(s.nextWake(), local(2026, 3, 10, 12, 10));
  assert.equal(s.list().p!._next_fire_time, null);
  assert.equal(s.list().o!._next_fire_time, null);
});

test("when: a time of day recurs daily, an ISO date-time once; splay stays within its bounds", () => {
  const s = new Schedule([parseJob("w", { function: "test.arg", when: ["3pm", "2026-03-10T13:00:00"] })], true, T0);
  assert.equal(s.nextWake(), local(2026, 3, 10, 13, 0));
  fired(s, local(2026, 3, 10, 13, 0));
  assert.equal(s.nextWake(), local(2026, 3, 10, 15, 0));
  fired(s, local(2026, 3, 10, 15, 0));
  assert.equal(s.nextWake(), local(2026, 3, 11, 15, 0));
  for (const rnd of [0, 0.5, 0.999]) {
    const sp = new Schedule([parseJob("s", { function: "test.arg", seconds: 10, splay: 5 }), parseJob("t", { function: "test.arg", seconds: 10, splay: { start: 2, end: 3 } })], true, T0, () => rnd);
    const l = sp.list();
    const at = (n: string) => Date.parse(String(l[n]!._next_fire_time)) - T0;
    assert.ok(at("s") >= 11_000 && at("s") <= 15_000, `splay 5: ${at("s")}`);
    assert.ok(at("t") >= 12_000 && at("t") <= 13_000, `splay 2..3: ${at("t")}`);
  }
});

test("range: fires only inside start..end (invert: only outside), over midnight too", () => {
  const day = parseJob("r", { function: "test.arg", seconds: 1, range: { start: "9am", end: "5pm" } }).range!;
  assert.equal(inRange(day, local(2026, 3, 10, 12, 0)), true);
  assert.equal(inRange(day, local(2026, 3, 10, 18, 0)), false);
  assert.equal(inRange({ ...day, invert: true }, local(2026, 3, 10, 18, 0)), true);
  const night = parseJob("n", { function: "test.arg", seconds: 1, range: { start: "22:00", end: "06:00" } }).range!;
  assert.equal(inRange(night, local(2026, 3, 10, 23, 0)), true);
  assert.equal(inRange(night, local(2026, 3, 10, 3, 0)), true);
  assert.equal(inRange(night, local(2026, 3, 10, 12, 0)), false);
  const s = new Schedule([parseJob("r", { function: "test.arg", seconds: 1, range: { start: "2026-03-10T13:00:00", end: "2026-03-10T14:00:00" } })], true, T0);
  assert.deepEqual(fired(s, T0 + 1000), ["r:skip"]);
});

test("enabled: False on a job or on the whole schedule skips it; a cluster owner's veto skips a fire", () => {
  const s = new Schedule([parseJob("a", { function: "test.arg", seconds: 1, enabled: false }), parseJob("b", { function: "test.arg", seconds: 1 })], true, T0);
  assert.deepEqual(fired(s, T0 + 1000), ["a:skip", "b"]);
  assert.deepEqual(s.due(T0 + 2000, (j) => j.name !== "b").map((d) => d.run), [false, false]);
  const off = new Schedule([parseJob("b", { function: "test.arg", seconds: 1 })], false, T0);
  assert.deepEqual(fired(off, T0 + 1000), ["b:skip"]);
  const o = readAutomationOptions({ schedule: { enabled: false, b: { function: "test.arg", seconds: 1 } } } as unknown as MasterConfig);
  assert.equal(o.scheduleEnabled, false);
  assert.deepEqual(Object.keys(o.schedule), ["b"]);
});

test("bad schedule and reactor options are refused naming the option", () => {
  const refused = (f: () => unknown, re: RegExp) =>
    assert.throws(f, (e: unknown) => isBrineError(e, "CONFIG_INVALID") && re.test((e as Error).message));
  refused(() => parseJob("x", { function: "test.arg" }), /schedule\.x: needs one of/);
  refused(() => parseJob("x", { function: "test.arg", seconds: 1, cron: "* * * * *" }), /schedule\.x: cannot use seconds\/minutes\/hours\/days and cron together/);
  refused(() => parseJob("x", { function: "test.arg", cron: "bogus" }), /schedule\.x\.cron/);
  refused(() => parseJob("x", { function: "test.arg", once: "next tuesday" }), /schedule\.x\.once/);
  refused(() => parseJob("x", { function: "test.arg", when: "tomorrow noon" }), /schedule\.x\.when\[0\]/);
  refused(() => parseJob("x", { function: "test.arg", seconds: 1, maxrunning: 0 }), /schedule\.x\.maxrunning/);
  refused(() => parseJob("x", { function: "test.arg", seconds: 1, splay: { start: 5, end: 1 } }), /schedule\.x\.splay/);
  refused(() => parseJob("x", { seconds: 1 }), /schedule\.x\.function/);
  refused(() => parseTime("25:00", "t"), /t:/);
  refused(() => readAutomationOptions({ reactor: [{ a: 1 }] } as unknown as MasterConfig), /reactor: entry 0/);
  refused(() => readAutomationOptions({ reactor_worker_hwm: 0 } as unknown as MasterConfig), /reactor_worker_hwm: must be between/);
  refused(() => readAutomationOptions({ reactor_worker_threads: "many" } as unknown as MasterConfig), /reactor_worker_threads: expected an integer/);
  refused(() => readAutomationOptions({ schedule: [] } as unknown as MasterConfig), /schedule: expected a map/);
});

test("a once or when time found up to loop_interval late at start still fires, as Salt's schedule does; one further back never", () => {
  const jobs = () => [
    parseJob("late", { function: "test.arg", once: "2026-03-10T11:59:45" }), // 45 s before T0
    parseJob("old", { function: "test.arg", once: "2026-03-10T11:58:00" }), // 150 s before T0
    parseJob("w", { function: "test.arg", when: ["2026-03-10T12:00:00"] }), // 30 s before T0
  ];
  const s = new Schedule(jobs(), true, T0, Math.random, 60_000);
  assert.deepEqual(fired(s, T0).sort(), ["late", "w"]);
  assert.deepEqual(fired(s, T0 + 1000), [], "each fires once");
  assert.equal(s.list().old!._next_fire_time, null);
  // without the grace (the old behaviour) none of them would fire
  assert.deepEqual(fired(new Schedule(jobs(), true, T0), T0), []);
});
