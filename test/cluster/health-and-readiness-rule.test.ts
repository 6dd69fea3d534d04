/**
 * The pure rule behind `cachedir/health/ready` and `salt-run cluster.health` (src/shared/cluster-health.ts):
 * who is ready (a table of cases), what the report says of each member (the leader knows every lag, a
 * follower only its own), and which state-sync status files are taken.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { readStateSyncStatus } from "../../src/shared/state-sync-status.js";
import { checkStateSyncStatus, clusterHealth, readiness, readyLagEntriesMax, type HealthGroupFacts } from "../../src/shared/cluster-health.js";
import { HealthWriter, createHealthBuffer, readHealth } from "../../src/shared/peer-health.js";

const group = (over: Partial<HealthGroupFacts> = {}): HealthGroupFacts => ({
  role: "follower",
  leaderId: "m1",
  term: 3,
  commit: 100,
  applied: 100,
  lastIndex: 100,
  voters: ["m1", "m2", "m3"],
  learners: [],
  ...over,
});

test("readiness: who is ready, and the reason", () => {
  const cases: { name: string; facts: Parameters<typeof readiness>[0]; ready: boolean; reason: RegExp }[] = [
    { name: "single master serving", facts: { clustered: false, serving: true }, ready: true, reason: /^serving$/ },
    { name: "single master stopping", facts: { clustered: false, serving: false }, ready: false, reason: /not serving/ },
    { name: "clustered, no group yet", facts: { clustered: true, serving: true, nodeId: "m4" }, ready: false, reason: /no cluster group/ },
    { name: "caught-up voter", facts: { clustered: true, serving: true, nodeId: "m2", group: group() }, ready: true, reason: /caught-up voter/ },
    { name: "leader", facts: { clustered: true, serving: true, nodeId: "m1", group: group({ role: "leader" }) }, ready: true, reason: /^leader$/ },
    { name: "voter without a leader", facts: { clustered: true, serving: true, nodeId: "m2", group: group({ leaderId: null, role: "candidate" }) }, ready: false, reason: /voter without a leader/ },
    { name: "voter behind by the bound", facts: { clustered: true, serving: true, nodeId: "m2", group: group({ applied: 100 - readyLagEntriesMax }) }, ready: true, reason: /caught-up/ },
    { name: "voter behind past the bound", facts: { clustered: true, serving: true, nodeId: "m2", group: group({ applied: 99 - readyLagEntriesMax }) }, ready: false, reason: /65 committed entries behind/ },
    { name: "learner in sync", facts: { clustered: true, serving: true, nodeId: "m4", group: group({ learners: ["m4"] }) }, ready: true, reason: /learner in sync/ },
    { name: "learner in the middle of its state-sync before promotion", facts: { clustered: true, serving: true, nodeId: "m4", group: group({ learners: ["m4"] }), joining: "state-sync from m2 before promotion" }, ready: false, reason: /learner not in sync: state-sync from m2 before promotion/ },
    { name: "voter, a joining note left over", facts: { clustered: true, serving: true, nodeId: "m4", group: group({ voters: ["m1", "m2", "m3", "m4"] }), joining: "state-sync from m2 before promotion" }, ready: true, reason: /caught-up voter/ },
    { name: "learner behind", facts: { clustered: true, serving: true, nodeId: "m4", group: group({ learners: ["m4"], applied: 0 }) }, ready: false, reason: /learner applying/ },
    { name: "removed member", facts: { clustered: true, serving: true, nodeId: "m9", group: group() }, ready: false, reason: /not a member/ },
    { name: "clustered, stopping", facts: { clustered: true, serving: false, nodeId: "m1", group: group() }, ready: false, reason: /not serving/ },
  ];
  for (const c of cases) {
    const r = readiness(c.facts);
    assert.equal(r.ready, c.ready, c.name);
    assert.match(r.reason, c.reason, c.name);
  }
});

test("cluster.health on the leader gives every member's lag and link; on a follower only its own lag unless the leader's view is handed in", () => {
  const now = Date.parse("2026-11-25T18:00:00Z");
  const links = { m2: { up: true, since: now - 5000 }, m3: { up: false, since: now - 2000 } };
  const leader = clusterHealth({
    clustered: true,
    serving: true,
    nodeId: "m1",
    group: group({ role: "leader", commit: 100, applied: 100, lastIndex: 101, learners: ["m4"], progress: { m2: { state: "replicate", match: 101, next: 102 }, m3: { state: "probe", match: 40, next: 41 }, m4: { state: "snapshot", match: 0, next: 1 } } }),
    links,
    now,
  });
  assert.equal(leader.ready, true);
  assert.equal(leader.leader, "m1");
  assert.equal(leader.term, 3);
  assert.equal(leader.commit_index, 100);
  assert.deepEqual(leader.learners, ["m4"]);
  assert.equal(leader.state_sync, null, "no status file: null");
  assert.deepEqual(leader.members, {
    m1: { role: "voter", leader: true, link: "self", link_since: null, match_index: 101, lag: 0 },
    m2: { role: "voter", leader: false, link: "up", link_since: "2026-11-25T17:59:55.000Z", match_index: 101, lag: 0 },
    m3: { role: "voter", leader: false, link: "down", link_since: "2026-11-25T17:59:58.000Z", match_index: 40, lag: 60 },
    m4: { role: "learner", leader: false, link: "unknown", link_since: null, match_index: 0, lag: 100 },
  });

  const follower = clusterHealth({ clustered: true, serving: true, nodeId: "m2", group: group({ applied: 90 }), now, stateSync: { error: "status.json: not JSON" } });
  const members = follower.members as Record<string, { lag: number | null }>;
  assert.equal(members.m2!.lag, 10, "its own lag: commit - applied");
  assert.equal(members.m1!.lag, null, "a follower does not know the others'");
  assert.match(String(follower.lag_known_for), /this master only \(the leader m1 could not be asked\)/);
  assert.deepEqual(follower.state_sync, { error: "status.json: not JSON" });

  // with the leader's view (asked over raft/progress): every member's lag as the leader sees it, its own as it applies
  const leaderView = { leaderId: "m1", commit: 104, lastIndex: 105, progress: { m2: { match: 101 }, m3: { match: 40 } } };
  const told = clusterHealth({ clustered: true, serving: true, nodeId: "m2", group: group({ applied: 90 }), now, leaderView });
  assert.deepEqual(
    Object.fromEntries(Object.entries(told.members as Record<string, { match_index: number | null; lag: number | null }>).map(([id, m]) => [id, [m.match_index, m.lag]])),
    { m1: [105, 0], m2: [null, 10], m3: [40, 64] },
  );
  assert.match(String(told.lag_known_for), /every member \(the others' as the leader m1 reported them\)/);
  const failed = clusterHealth({ clustered: true, serving: true, nodeId: "m2", group: group(), now, leaderView: { error: "peer m1 is down" } });
  assert.match(String(failed.lag_known_for), /could not be asked: peer m1 is down/);
  // a view from a master that is not the leader this follower knows is not used
  const stale = clusterHealth({ clustered: true, serving: true, nodeId: "m2", group: group(), now, leaderView: { ...leaderView, leaderId: "m3" } });
  assert.equal((stale.members as Record<string, { lag: number | null }>).m3!.lag, null);
});

test("the health board carries a joining master's wait to the runner threads, and drops it once promoted", () => {
  const w = new HealthWriter(createHealthBuffer(), 1000);
  w.set("m2", true, 1001);
  w.setJoining("state-sync from m2 before promotion", 1002);
  assert.equal(readHealth(w.sab)?.joining, "state-sync from m2 before promotion");
  assert.deepEqual(readHealth(w.sab)?.peers, { m2: { up: true, since: 1001 } });
  w.setJoining(undefined, 1003);
  assert.equal(readHealth(w.sab)?.joining, undefined);
});

test("state-sync status files: the writer's shape is taken, anything else is named", () => {
  const good = { keys: { m2: { at: 1764093600000, items: 3, bytes: 2400, deleted: 1, errors: 0 } }, roots: { m3: { at: "2026-11-25T18:00:00Z", items: 0, bytes: 0, deleted: 0, errors: [] } } };
  assert.deepEqual(checkStateSyncStatus(good), { status: good });
  const bad: [unknown, RegExp][] = [
    [[], /not a mapping of channels/],
    [{ keys: 3 }, /channel keys: not a mapping of peers/],
    [{ keys: { m2: { at: 1, items: "3", bytes: 0, deleted: 0, errors: 0 } } }, /items is not a number/],
    [{ keys: { m2: { items: 1, bytes: 0, deleted: 0, errors: 0 } } }, /at is missing/],
    [{ keys: { m2: { at: 1, items: 1, bytes: 0, deleted: 0 } } }, /errors is missing/],
  ];
  for (const [v, re] of bad) {
    const r = checkStateSyncStatus(v);
    assert.ok("error" in r && re.test(r.error), JSON.stringify(v));
  }
});

test("the state-sync status file: absent is null, damaged is named, the writer's content is taken", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-health-"));
  try {
    assert.equal(readStateSyncStatus(dir), undefined);
    mkdirSync(path.join(dir, "brine-state-sync"));
    const file = path.join(dir, "brine-state-sync", "status.json");
    writeFileSync(file, "{not json");
    assert.match((readStateSyncStatus(dir) as { error: string }).error, /status\.json: not JSON/);
    writeFileSync(file, JSON.stringify({ keys: [] }));
    assert.match((readStateSyncStatus(dir) as { error: string }).error, /channel keys: not a mapping of peers/);
    const good = { keys: { m2: { at: 1, items: 1, bytes: 450, deleted: 0, errors: 0 } } };
    writeFileSync(file, JSON.stringify(good));
    assert.deepEqual(readStateSyncStatus(dir), { status: good });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
