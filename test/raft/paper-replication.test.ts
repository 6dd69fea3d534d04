/**
 * Raft paper §5.3 (log replication), one test per sentence. Index 1 is the genesis entry every founder
 * starts from (term 1); the paper's index i is our index i + 1 in the Figure 7 test.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Net, acceptAndReply, brief, bytes, entry, logTerms, makeLeader, msg, newRaft, persist, storageWithLog, take, text } from "./helpers.js";

/** A leader of term 2 whose no-op (index 2) every follower acknowledged and the leader persisted. */
function committedLeader(voters = [1, 2, 3]) {
  const r = newRaft(1, voters);
  makeLeader(r);
  for (const id of voters.slice(1)) r.step(msg("MsgAppResp", id, 1, r.term, { index: 2 }));
  persist(r);
  take(r);
  assert.equal(r.log.committed, 2);
  return r;
}

function propose(r: ReturnType<typeof newRaft>, data: string): void {
  r.tracker.add("propose", bytes(data));
  r.flushRequests();
}

test("§5.3 the leader appends the command to its log as a new entry, then issues AppendEntries RPCs in parallel to each of the other servers", () => {
  const r = committedLeader();
  propose(r, "some data");
  assert.equal(r.log.lastIndex(), 3);
  assert.equal(r.log.committed, 2, "not committed before replication");
  assert.deepEqual(brief(take(r)), ["1->2 MsgApp t2 i2 lt2 c2 ents=2/3", "1->3 MsgApp t2 i2 lt2 c2 ents=2/3"]);
});

test("§5.3 when sending an AppendEntries RPC, the leader includes the index and term of the entry that immediately precedes the new entries", () => {
  const r = committedLeader();
  propose(r, "a");
  take(r);
  propose(r, "b");
  for (const m of take(r)) {
    assert.equal(m.index, 3);
    assert.equal(m.logTerm, 2);
    assert.deepEqual(m.entries!.map((e) => e.index), [4]);
  }
});

test("§5.3 the new entry is written to stable storage (handed to the application as unstable) before it counts as replicated", () => {
  const r = committedLeader();
  propose(r, "persist me");
  const unstable = r.log.unstable.entries;
  assert.deepEqual(unstable.map((e) => [e.index, e.term, text(e.data)]), [[3, 2, "persist me"]]);
});

test("§5.3 a log entry is committed once the leader that created the entry has replicated it on a majority of the servers", () => {
  const cases: { size: number; acceptors: number[]; committed: boolean }[] = [
    { size: 1, acceptors: [], committed: true },
    { size: 3, acceptors: [], committed: false },
    { size: 3, acceptors: [2], committed: true },
    { size: 3, acceptors: [2, 3], committed: true },
    { size: 5, acceptors: [], committed: false },
    { size: 5, acceptors: [2], committed: false },
    { size: 5, acceptors: [2, 3], committed: true },
    { size: 5, acceptors: [2, 3, 4, 5], committed: true },
  ];
  for (const c of cases) {
    const ids = Array.from({ length: c.size }, (_, k) => k + 1);
    const r = committedLeader(ids);
    propose(r, "x");
    for (const m of take(r)) if (c.acceptors.includes(m.to) && m.type === "MsgApp") r.step(acceptAndReply(m));
    assert.equal(r.log.committed === 3, c.committed, JSON.stringify(c));
  }
});

test("§5.3 committing an entry also commits all preceding entries in the leader's log, including entries created by previous leaders", () => {
  // Entries of term 2 left by a previous leader (uncommitted), then this node leads term 3.
  const s = storageWithLog([1, 2, 3], [2, 2], 2);
  const r = newRaft(1, [1, 2, 3], { storage: s });
  makeLeader(r);
  assert.equal(r.term, 3);
  assert.equal(r.log.lastIndex(), 4, "the no-op of term 3 follows the term-2 entries");
  r.step(msg("MsgAppResp", 2, 1, 3, { index: 4 }));
  assert.equal(r.log.committed, 4);
  assert.deepEqual(r.log.nextCommittedEnts(1 << 20).map((e) => [e.index, e.term]), [[2, 2], [3, 2], [4, 3]]);
});

test("§5.3 the leader keeps track of the highest index it knows to be committed and includes it in future AppendEntries RPCs (including heartbeats)", () => {
  const r = committedLeader();
  propose(r, "x");
  for (const m of take(r)) r.step(acceptAndReply(m));
  assert.equal(r.log.committed, 3);
  assert.deepEqual(brief(take(r)), [], "no message of its own for the new commit index");
  propose(r, "y");
  const apps = take(r);
  assert.deepEqual(apps.map((m) => [m.type, m.to, m.commit]), [["MsgApp", 2, 3], ["MsgApp", 3, 3]], "the next append carries it");
  r.tick();
  const beats = take(r).filter((m) => m.type === "MsgHeartbeat");
  assert.deepEqual(beats.map((m) => [m.to, m.commit]), [[2, 3], [3, 3]], "so does the next heartbeat");
});

test("§5.3 a follower whose forwarded proposal committed learns the commit index at once", () => {
  const r = committedLeader();
  r.step(msg("MsgProp", 2, 1, 0, { entries: [entry(0, 0, "from-2")], requests: [7], incarnation: 1, batch: 1 }));
  const sent = take(r);
  assert.deepEqual(sent.map((m) => [m.type, m.to]), [["MsgApp", 2], ["MsgPropResp", 2], ["MsgApp", 3]]);
  // node 3 acknowledges first: the entry commits, and node 2, which waits for it, is told now
  r.step(acceptAndReply(sent.find((m) => m.to === 3)!));
  assert.equal(r.log.committed, 3);
  assert.deepEqual(take(r).map((m) => [m.type, m.to, m.commit]), [["MsgApp", 2, 3]]);
});

test("§5.3 once a follower learns that a log entry is committed, it applies the entry to its local state machine (in log order)", () => {
  const r = newRaft(2, [1, 2, 3]);
  r.step(msg("MsgApp", 1, 2, 2, { index: 1, logTerm: 1, entries: [entry(2, 2, "a"), entry(3, 2, "b"), entry(4, 2, "c")], commit: 1 }));
  assert.deepEqual(r.log.nextCommittedEnts(1 << 20), [], "nothing committed yet");
  r.step(msg("MsgApp", 1, 2, 2, { index: 4, logTerm: 2, commit: 3 }));
  assert.deepEqual(r.log.nextCommittedEnts(1 << 20).map((e) => text(e.data)), ["a", "b"]);
});

test("§5.3 if the follower does not find an entry in its log with the same index and term, it refuses the new entries", () => {
  const s = storageWithLog([1, 2, 3], [1, 2]); // indexes 2 (term 1), 3 (term 2)
  const cases = [
    { index: 3, logTerm: 2, reject: false },
    { index: 2, logTerm: 1, reject: false },
    { index: 3, logTerm: 3, reject: true }, // term mismatch at 3
    { index: 4, logTerm: 2, reject: true }, // no entry at 4
  ];
  for (const c of cases) {
    const r = newRaft(2, [1, 2, 3], { storage: s.clone() });
    r.becomeFollower(2, 1);
    r.step(msg("MsgApp", 1, 2, 2, { index: c.index, logTerm: c.logTerm, commit: 1 }));
    const [resp] = take(r);
    assert.equal(resp!.type, "MsgAppResp");
    assert.equal(resp!.reject, c.reject, JSON.stringify(c));
  }
});

test("§5.3 if an existing entry conflicts with a new one, the follower deletes it and all that follow, then appends the new entries", () => {
  const cases: { index: number; logTerm: number; ents: [number, number][]; want: number[] }[] = [
    // existing log (after genesis): 2:t1 3:t2
    { index: 3, logTerm: 2, ents: [[4, 3]], want: [1, 1, 2, 3] },
    { index: 2, logTerm: 1, ents: [[3, 3], [4, 4]], want: [1, 1, 3, 4] },
    { index: 1, logTerm: 1, ents: [[2, 1]], want: [1, 1, 2] },
    { index: 1, logTerm: 1, ents: [[2, 3]], want: [1, 3] },
  ];
  for (const c of cases) {
    const r = newRaft(2, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [1, 2]) });
    r.becomeFollower(2, 1);
    r.step(msg("MsgApp", 1, 2, 4, { index: c.index, logTerm: c.logTerm, entries: c.ents.map(([i, t]) => entry(i, t)), commit: 1 }));
    assert.deepEqual([r.log.term(1), ...logTerms(r)], c.want, JSON.stringify(c));
  }
});

test("§5.3 when a leader first comes to power, it initializes all nextIndex values to the index just after the last one in its log", () => {
  const r = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [1, 2, 2], 2) });
  const last = r.log.lastIndex();
  makeLeader(r);
  assert.equal(r.prs.get(2)!.next, last + 1);
  assert.equal(r.prs.get(3)!.next, last + 1);
});

// Figure 7: the leader's log, and six follower logs (a)-(f), paper indexes 1..12.
const FIG7_LEADER = [1, 1, 1, 4, 4, 5, 5, 6, 6, 6];
const FIG7_FOLLOWERS: Record<string, number[]> = {
  a: [1, 1, 1, 4, 4, 5, 5, 6, 6],
  b: [1, 1, 1, 4],
  c: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 6],
  d: [1, 1, 1, 4, 4, 5, 5, 6, 6, 6, 7, 7],
  e: [1, 1, 1, 4, 4, 4, 4],
  f: [1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 3],
};

for (const [name, follower] of Object.entries(FIG7_FOLLOWERS)) {
  test(`§5.3 the leader brings a follower's log into consistency with its own (Figure 7 ${name}), backing off a whole term per round trip`, () => {
    const lead = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], FIG7_LEADER, 7) });
    const f = newRaft(2, [1, 2, 3], { storage: storageWithLog([1, 2, 3], follower, 7) });
    const helper = newRaft(3, [1, 2, 3], { storage: storageWithLog([1, 2, 3], FIG7_LEADER, 7) });
    const net = new Net([lead, f, helper]);
    net.campaign(1);
    assert.equal(lead.role, "leader");
    assert.equal(lead.term, 8);
    net.propose(1, "x");
    assert.deepEqual(logTerms(f), logTerms(lead));
    const rejects = net.delivered.filter((m) => m.type === "MsgAppResp" && m.from === 2 && m.reject).length;
    // One rejection per conflicting term at most (the paper's optimization), not one per index.
    assert.ok(rejects <= 2, `${rejects} rejections to sync log ${name}`);
  });
}

test("§5.3 a leader never overwrites or deletes entries in its own log (Leader Append-Only)", () => {
  const r = committedLeader();
  propose(r, "a");
  propose(r, "b");
  take(r);
  const before = logTerms(r);
  // Followers whose logs diverge reject; stale and conflicting answers must not touch the leader's log.
  r.step(msg("MsgAppResp", 2, 1, 2, { index: 4, reject: true, rejectHint: 1, logTerm: 1 }));
  r.step(msg("MsgAppResp", 3, 1, 2, { index: 3, reject: true, rejectHint: 2, logTerm: 2 }));
  r.step(msg("MsgAppResp", 2, 1, 2, { index: 2 }));
  assert.deepEqual(logTerms(r), before);
  assert.equal(r.log.lastIndex(), 4);
});
