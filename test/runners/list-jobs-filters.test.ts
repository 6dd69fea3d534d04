/**
 * jobs.list_jobs' filters as Salt's runner applies them (salt/runners/jobs.py): search_function and
 * search_target are fnmatch globs (a list, or a comma-separated string), search_metadata lists a job when one of
 * its pairs is in the job's Metadata, start_time / end_time bound StartTime, every filter given must match, and
 * the arguments keep Salt's positions. brine read them as substrings at the wrong positions before.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runnerHarness } from "./helpers.js";
import { entryMatches, filterOf, listJobsFilter, parseJobTime } from "../../src/runners/list-jobs-filter.js";
import { isBrineError } from "../../src/shared/errors.js";

const entry = (over: Record<string, unknown> = {}) => ({ Function: "test.ping", Arguments: [], Target: "web1", "Target-type": "glob", User: "root", StartTime: "2026, Nov 25 10:00:00.000001", ...over });

test("each filter matches as Salt's list_jobs does", () => {
  const rows: Array<[string, Record<string, unknown>, Record<string, unknown>, boolean]> = [
    ["a function glob", { search_function: "test.*" }, entry(), true],
    ["a function glob that does not match", { search_function: "cmd.*" }, entry(), false],
    ["a substring is not a glob", { search_function: "ping" }, entry(), false],
    ["comma-separated functions", { search_function: "cmd.run, test.ping" }, entry(), true],
    ["a list of functions", { search_function: ["cmd.run", "test.p?ng"] }, entry(), true],
    ["a target glob", { search_target: "web*" }, entry(), true],
    ["a list target: one of its ids matches", { search_target: "db*" }, entry({ Target: ["web1", "db2"], "Target-type": "list" }), true],
    ["a target glob is case-sensitive", { search_target: "WEB*" }, entry(), false],
    ["metadata: one pair that matches is enough", { search_metadata: { a: 1, b: 2 } }, entry({ Metadata: { b: 2 } }), true],
    ["metadata: equal values only", { search_metadata: { b: 3 } }, entry({ Metadata: { b: 2 } }), false],
    ["metadata: a job without Metadata", { search_metadata: { b: 2 } }, entry(), false],
    ["metadata: nested values compared as Python's ==", { search_metadata: { m: { x: [1, 2] } } }, entry({ Metadata: { m: { x: [1, 2] } } }), true],
    ["start_time: started at or after", { start_time: "2026-11-25 10:00" }, entry(), true],
    ["start_time: started before", { start_time: "2026-11-25 10:01" }, entry(), false],
    ["end_time: started at or before", { end_time: "2026, Nov 25 10:00:01" }, entry(), true],
    ["end_time: started after", { end_time: "2026-11-25 09:59:59" }, entry(), false],
    ["every filter must match", { search_function: "test.*", search_target: "db*" }, entry(), false],
    ["empty filters filter nothing", { search_function: "", search_target: [], search_metadata: {} }, entry(), true],
  ];
  for (const [name, kwarg, e, want] of rows) assert.equal(entryMatches(listJobsFilter([], kwarg), e), want, name);
});

test("list_jobs' arguments keep Salt's positions: ext_source, outputter, search_metadata, search_function, search_target, start_time, end_time", () => {
  assert.deepEqual(listJobsFilter(["", "", "", "test.*", "web*", "2026-11-25"], {}), { functions: ["test.*"], targets: ["web*"], startMs: parseJobTime("2026-11-25") });
  assert.deepEqual(listJobsFilter(["", "", { k: "v" }], {}), { metadata: { k: "v" } });
  assert.deepEqual(filterOf(null, "a,b", undefined), { functions: ["a", "b"] });
});

test("what brine cannot honour is refused with the value named, never ignored", () => {
  const refused = (arg: unknown[], kwarg: Record<string, unknown>, part: string) =>
    assert.throws(() => listJobsFilter(arg, kwarg), (e) => isBrineError(e, "RUNNER_BAD_ARGUMENT") && (e as Error).message.includes(part), part);
  refused([], { search_metadata: "foo" }, "search_metadata must be a dictionary");
  refused([], { start_time: "next tuesday-ish" }, "next tuesday-ish");
  refused(["mysql"], {}, "ext_source");
  assert.doesNotThrow(() => listJobsFilter(["local_cache"], {}));
});

test("times are read as ISO 8601, as Salt's StartTime and as Date.parse reads them, in local time", () => {
  assert.equal(parseJobTime("2026-11-25 10:00"), new Date(2026, 10, 25, 10, 0).getTime());
  assert.equal(parseJobTime("2026-11-25"), new Date(2026, 10, 25).getTime());
  assert.equal(parseJobTime("2026, Nov 25 10:00:00.000001"), new Date(2026, 10, 25, 10, 0, 0).getTime());
  assert.equal(parseJobTime("Nov 25 2026 10:00"), new Date(2026, 10, 25, 10, 0).getTime());
  assert.ok(Number.isNaN(parseJobTime("2026-13-01")));
  assert.ok(Number.isNaN(parseJobTime("2026, Foo 25 10:00")));
});

test("salt-run jobs.list_jobs with filters lists only the jobs that match them, and an outputter wraps the answer as Salt's", async () => {
  const h = runnerHarness();
  try {
    await h.ctx.jobs.saveLoad("20261125100000000001", { fun: "test.ping", arg: [], tgt: "web1", tgt_type: "glob", user: "root" }, ["web1"]);
    await h.ctx.jobs.saveLoad("20261125100000000002", { fun: "cmd.run", arg: ["ls"], tgt: ["db1", "db2"], tgt_type: "list", user: "sam", metadata: { ticket: 7 } }, ["db1", "db2"]);
    await h.ctx.jobs.saveLoad("20261125110000000003", { fun: "test.version", arg: [], tgt: "db1", tgt_type: "glob", user: "root" }, ["db1"]);
    const keys = async (arg: unknown[], kwarg: Record<string, unknown> = {}) => Object.keys((await h.run("jobs.list_jobs", arg, kwarg)) as Record<string, unknown>).sort();
    assert.deepEqual(await keys([], { search_function: "test.*" }), ["20261125100000000001", "20261125110000000003"]);
    assert.deepEqual(await keys([], { search_target: "db2" }), ["20261125100000000002"]);
    assert.deepEqual(await keys(["", "", "", "", "db*"]), ["20261125100000000002", "20261125110000000003"]);
    assert.deepEqual(await keys([], { search_metadata: { ticket: 7 } }), ["20261125100000000002"]);
    assert.deepEqual(await keys([], { start_time: "2026-11-25 10:30" }), ["20261125110000000003"]);
    assert.deepEqual(await keys([], { end_time: "2026-11-25 10:30", search_function: "test.*" }), ["20261125100000000001"]);
    const wrapped = (await h.run("jobs.list_jobs", [], { outputter: "yaml", search_function: "cmd.run" })) as Record<string, unknown>;
    assert.deepEqual(Object.keys(wrapped), ["outputter", "data"]);
    assert.equal(wrapped.outputter, "yaml");
    assert.deepEqual(Object.keys(wrapped.data as object), ["20261125100000000002"]);
    // last_run uses the same filters: the newest job whose function matches the glob
    const last = (await h.run("jobs.last_run", [], { function: "test.*" })) as Record<string, unknown>;
    assert.deepEqual(Object.keys(last), ["20261125110000000003"]);
    assert.deepEqual(Object.keys((await h.run("jobs.last_run", [], { metadata: { ticket: 7 } })) as object), ["20261125100000000002"]);
  } finally {
    await h.close();
  }
});
