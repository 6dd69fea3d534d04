/**
 * Raft paper §5.4 (safety) and §5.5 (follower and candidate crashes), one test per sentence.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Net, entry, logTerms, msg, newRaft, storageWithLog, take, text } from "./helpers.js";
import { electedEnv } from "./env.js";

test("§5.4.1 the RequestVote RPC includes information about the candidate's log (index and term of its last entry)", () => {
  const r = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [2, 3], 3) });
  r.step(msg("MsgHup", 1, 1, 0));
  for (const m of take(r)) {
    assert.equal(m.type, "MsgVote");
    assert.equal(m.index, 3);
    assert.equal(m.logTerm, 3);
  }
});

test("§5.4.1 the voter denies its vote if its own log is more up-to-date than that of the candidate", () => {
  // Voter log: last entry index 3, term 2. Later term wins; same term: longer log wins.
  const cases = [
    { index: 3, logTerm: 2, granted: true },
    { index: 4, logTerm: 2, granted: true },
    { index: 2, logTerm: 2, granted: false },
    { index: 2, logTerm: 3, granted: true },
    { index: 9, logTerm: 1, granted: false },
  ];
  for (const c of cases) {
    const r = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [1, 2], 2) });
    r.step(msg("MsgVote", 2, 1, 3, { index: c.index, logTerm: c.logTerm }));
    const [resp] = take(r);
    assert.equal(!resp!.reject, c.granted, JSON.stringify(c));
  }
});

test("§5.4.1 a candidate cannot win an election unless its log contains all committed entries", () => {
  const net = Net.of([1, 2, 3]);
  net.campaign(1);
  net.isolate(3);
  net.propose(1, "committed");
  const leader = net.get(1);
  assert.equal(leader.log.committed, 3, "1 and 2 hold index 3");
  net.recover();
  // Node 3 missed the entry. Its campaign cannot succeed: 1 and 2 have a more up-to-date log.
  const three = net.get(3);
  net.isolate(1); // even with the old leader out of the way
  net.campaign(3);
  assert.notEqual(three.role, "leader");
  net.campaign(2);
  assert.equal(net.get(2).role, "leader");
  assert.equal(net.get(2).log.term(3), 2, "the new leader holds the committed entry");
});

test("§5.4.2 Raft never commits log entries from previous terms by counting replicas (Figure 8)", () => {
  // Leader of term 3 holds an entry of term 2 at index 2 that a majority has, but no entry of its own yet.
  const s = storageWithLog([1, 2, 3], [2], 2);
  const r = newRaft(1, [1, 2, 3], { storage: s });
  r.becomeCandidate();
  r.becomeLeader();
  // becomeLeader appends the term-3 no-op at index 3; a majority acknowledging only index 2 commits nothing.
  take(r);
  r.step(msg("MsgAppResp", 2, 1, 3, { index: 2 }));
  assert.equal(r.log.committed, 1, "term-2 entry replicated on a majority is not committed by counting");
  r.step(msg("MsgAppResp", 2, 1, 3, { index: 3 }));
  assert.equal(r.log.committed, 3, "once an entry of the current term commits, all prior ones are committed indirectly");
});

test("§5.4.2 a leader only commits entries of its current term by counting replicas, even when the old entry is everywhere", () => {
  const r = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [2, 2], 2) });
  r.becomeCandidate();
  r.becomeLeader();
  take(r);
  assert.equal(r.log.maybeCommit(3, r.term), false, "an index of an older term never commits directly");
  assert.equal(r.log.committed, 1);
});

test("§5.4.3 state machine safety: if a server has applied an entry at an index, no other server ever applies a different entry there", () => {
  const env = electedEnv();
  env.propose(1, "a");
  env.stabilize();
  // Leader 1 appends entries only it holds, then dies; 2 takes over and commits different entries.
  env.partition([[1], [2, 3]]);
  env.propose(1, "lost-1");
  env.propose(1, "lost-2");
  env.stabilize();
  env.crash(1);
  // 2 times out first (3 still honours the old leader's lease), then 3 times out and 2 grants it.
  env.tick(2, 10);
  env.stabilize([2, 3]);
  env.tick(3, 10);
  env.stabilize([2, 3]);
  assert.equal(env.leader(), 3);
  env.propose(3, "b");
  env.stabilize([2, 3]);
  env.heal();
  env.restart(1);
  for (let k = 0; k < 3; k++) {
    env.tick(3, 1);
    env.stabilize();
  }
  const applied = [1, 2, 3].map((id) => env.appliedBy.get(id)!.map((e) => `${e.term}/${e.index}`));
  assert.deepEqual(applied[1], applied[2]);
  // Node 1 restarted and replayed from its snapshot; every index it applied matches the others.
  for (const pos of applied[0]!) {
    const idx = Number(pos.split("/")[1]);
    const other = applied[1]!.find((p) => Number(p.split("/")[1]) === idx);
    assert.equal(pos, other, `index ${idx}`);
  }
  for (const id of [1, 2, 3]) {
    assert.ok(!env.appliedBy.get(id)!.some((e) => text(e.data).startsWith("lost")), `node ${id} applied an uncommitted entry`);
  }
  assert.equal(env.node(1).app.applied, env.node(3).app.applied, "the old leader caught up");
  assert.equal(env.node(1).disk.term(5), 3, "its uncommitted entries were overwritten by the new leader's");
});

test("§5.5 if a follower receives an AppendEntries request that includes log entries already present in its log, it ignores those entries", () => {
  const r = newRaft(2, [1, 2, 3]);
  const app = msg("MsgApp", 1, 2, 2, { index: 1, logTerm: 1, entries: [entry(2, 2, "a"), entry(3, 2, "b")], commit: 1 });
  r.step(app);
  take(r);
  const unstableBefore = r.log.unstable.entries.slice();
  r.step(app); // retried after a lost response
  assert.deepEqual(r.log.unstable.entries, unstableBefore, "no truncation, no duplicate");
  assert.deepEqual(logTerms(r), [2, 2]);
  const [resp] = take(r);
  assert.equal(resp!.index, 3);
  assert.equal(resp!.reject, false);
});

test("§5.5 a crashed follower that restarts keeps its term and vote (it never votes twice in a term)", () => {
  const env = electedEnv();
  const term = env.rn(2).raft.term;
  env.crash(2);
  env.restart(2);
  const r = env.rn(2).raft;
  assert.equal(r.term, term);
  assert.equal(r.vote, 1);
  r.step(msg("MsgVote", 3, 2, term, { index: 99, logTerm: 99 }));
  const resp = r.msgs.find((m) => m.type === "MsgVoteResp");
  assert.equal(resp?.reject, true, "already voted for 1 in this term");
});

test("§5.2/§5.4 a leader elected without some entry still cannot lose an entry that a majority acknowledged", () => {
  const net = Net.of([1, 2, 3, 4, 5]);
  net.campaign(1);
  net.cut(1, 4);
  net.cut(1, 5);
  net.propose(1, "acked");
  const idx = net.get(1).log.lastIndex();
  assert.equal(net.get(1).log.committed, idx);
  net.recover();
  net.isolate(1);
  net.campaign(4); // 4 and 5 lack the entry; 2 and 3 refuse them
  assert.notEqual(net.get(4).role, "leader");
  net.campaign(2);
  const leader = net.leaders().find((r) => r.id !== 1)!;
  assert.ok(leader.log.lastIndex() >= idx && leader.log.term(idx) === net.get(1).log.term(idx));
});
