/**
 * The master of masters' wait (ReturnWaiter with syndic_wait): minions below syndics are learned from the
 * syndics' `syndic/<syndic>/salt/job/<jid>/new` reports, the wait lasts at least syndic_wait, and a minion a
 * lower master named in `not_connected` is reported not connected only when no syndic reported it connected;
 * on any master, a minion its own `salt/job/<jid>/new` names in `not_connected` (not connected when published).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ReturnWaiter } from "../../src/lib/client/return-waiter.js";

const JID = "20261125120000000001";
const report = (syndic: string, minions: string[], notConnected?: string[]) => ({
  tag: `syndic/${syndic}/salt/job/${JID}/new`,
  data: { jid: JID, minions, syndic, ...(notConnected ? { not_connected: notConnected } : {}) },
});
const ret = (id: string) => ({ tag: `salt/job/${JID}/ret/${id}`, data: { id, jid: JID, return: true } });

/** Run a wait to its end: the events at t=0, then time moves on; returns the missing minions and which are not connected. */
function run(events: { tag: string; data: Record<string, unknown> }[]): { missing: string[]; notConnected: string[]; doneAt: number } {
  const w = new ReturnWaiter(JID, [], 1000, 1000, 0, 2000);
  for (const e of events) w.onEvent(e.tag, e.data, 0);
  for (let t = 0; t < 60_000; t += 100) {
    const a = w.tick(t);
    if (a?.type === "done") return { missing: a.missing, notConnected: a.missing.filter((m) => w.notConnectedBelow(m)), doneAt: t };
  }
  throw new Error("the wait never ended");
}

const cases: { name: string; events: { tag: string; data: Record<string, unknown> }[]; missing: string[]; notConnected: string[] }[] = [
  { name: "a lower master names its stopped minion", events: [report("s1", ["a", "b"], ["b"]), ret("a")], missing: ["b"], notConnected: ["b"] },
  { name: "a report without not_connected (a Python lower master) says nothing of presence", events: [report("s1", ["a", "b"]), ret("a")], missing: ["b"], notConnected: [] },
  { name: "a minion another syndic reported connected is not reported not connected", events: [report("s1", ["b"], ["b"]), report("s2", ["b", "c"]), ret("c")], missing: ["b"], notConnected: [] },
  { name: "not_connected naming a minion the report did not match is ignored", events: [report("s1", ["a"], ["zz"]), ret("a")], missing: [], notConnected: [] },
  { name: "a minion named not connected that returns after all is not missing", events: [report("s1", ["a", "b"], ["b"]), ret("a"), ret("b")], missing: [], notConnected: [] },
];

for (const c of cases) {
  test(`master of masters' wait: ${c.name}`, () => {
    const r = run(c.events);
    assert.deepEqual(r.missing, c.missing);
    assert.deepEqual(r.notConnected, c.notConnected);
    assert.ok(r.doneAt >= 2000, `the wait lasted syndic_wait at least (${r.doneAt} ms)`);
  });
}

test("a master's own job: a minion its salt/job/<jid>/new names not connected is so reported when it stays silent", () => {
  const w = new ReturnWaiter(JID, ["a", "b", "c"], 1000, 1000, 0);
  w.onEvent(`salt/job/${JID}/new`, { jid: JID, minions: ["a", "b", "c"], not_connected: ["b"] }, 0);
  w.onEvent(`salt/job/${JID}/ret/a`, { id: "a", jid: JID, return: true }, 0);
  let done: string[] | undefined;
  for (let t = 0; t < 60_000 && !done; t += 100) {
    const act = w.tick(t);
    if (act?.type === "done") done = act.missing;
  }
  assert.deepEqual(done, ["b", "c"]);
  assert.equal(w.wasNotConnected("b"), true);
  assert.equal(w.wasNotConnected("c"), false, "a minion connected when published is not");
});
