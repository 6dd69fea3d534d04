/**
 * jobs.lookup_jid as Salt 3007's runner answers (salt/runners/jobs.py lookup_jid, read from Salt's source):
 * positional arguments jid, ext_source, returned, missing, display_progress; {id: return} of the returns, then
 * "Minion did not return" for each expected minion without one when `missing`; {outputter, data} when the first
 * return names an outputter (a state run's `out: highstate`). The answer is written as msgpack while the returns are
 * read: a runner's result stored as msgpack bytes comes back as its value.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runnerHarness } from "./helpers.js";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";

const JID = "20261126010000000000";

async function job(h: ReturnType<typeof runnerHarness>): Promise<void> {
  await h.ctx.jobs.saveLoad(JID, { fun: "test.ping", tgt: "*" }, ["web1", "web2", "db1", "gone"]);
  await h.ctx.jobs.addReturn(JID, "web2", { return: { answer: [1, "two"] }, retcode: 0 });
  await h.ctx.jobs.addReturn(JID, "db1", { return: false, retcode: 1 });
  await h.ctx.jobs.addReturn(JID, "web1", { return: true, retcode: 0 });
}

test("lookup_jid: the returns by minion id; missing (fourth positional or missing=True) adds the expected minions that did not return; returned=False leaves out those that did", async () => {
  const h = runnerHarness();
  try {
    await job(h);
    const returns = { db1: false, web1: true, web2: { answer: [1, "two"] } };
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID]), returns);
    assert.deepEqual(Object.keys((await h.run("jobs.lookup_jid", [JID])) as object), ["db1", "web1", "web2"]);
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID, null, true, true]), { ...returns, gone: "Minion did not return" });
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID], { missing: true }), { ...returns, gone: "Minion did not return" });
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID], { returned: false, missing: true }), { gone: "Minion did not return" });
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID, null, false]), {});
    assert.deepEqual(await h.run("jobs.lookup_jid", ["20000101000000000000"], { missing: true }), {}, "an unknown jid");
  } finally {
    await h.close();
  }
});

test("lookup_jid answers {outputter, data} when the first return names its outputter, as Salt does for a state run", async () => {
  const h = runnerHarness();
  try {
    const state = { "test_|-t_|-t_|-succeed_without_changes": { result: true, comment: "ok", changes: {} } };
    await h.ctx.jobs.saveLoad(JID, { fun: "state.apply", tgt: "*" }, ["a", "b"]);
    await h.ctx.jobs.addReturn(JID, "a", { return: state, retcode: 0, out: "highstate" });
    await h.ctx.jobs.addReturn(JID, "b", { return: state, retcode: 0, out: "highstate" });
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID]), { outputter: "highstate", data: { a: state, b: state } });
  } finally {
    await h.close();
  }
});

test("lookup_jid of a runner's job gives its result, stored as the msgpack bytes the runner made, as its value", async () => {
  const h = runnerHarness();
  try {
    const result = { listed: Array.from({ length: 50 }, (_, i) => `job-${i}`), n: 50 };
    await h.ctx.jobs.saveLoad(JID, { fun: "runner.jobs.list_jobs", tgt: "master", tgt_type: "list" }, ["master"]);
    await h.ctx.jobs.addReturn(JID, "master", { return: undefined, return_msgpack: encodeWire(result), success: true });
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID]), { master: result });
    assert.deepEqual(h.ctx.jobs.returnsFor(JID).master!.return, result, "the same value returnsFor decodes");
  } finally {
    await h.close();
  }
});

test("lookup_jid refuses an ext_source other than local_cache, and display_progress prints the returner and each minion", async () => {
  const h = runnerHarness();
  try {
    await job(h);
    await assert.rejects(h.run("jobs.lookup_jid", [JID, "redis"]), /ext_source "redis" is not implemented by brine/);
    assert.deepEqual(await h.run("jobs.lookup_jid", [JID, "local_cache"]), { db1: false, web1: true, web2: { answer: [1, "two"] } });
    await h.run("jobs.lookup_jid", [JID], { display_progress: true });
    assert.deepEqual(h.printed, ["Querying returner: local_cache", "db1", "web1", "web2"]);
  } finally {
    await h.close();
  }
});
