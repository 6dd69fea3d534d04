/**
 * Raft paper §5.1–§5.2 (terms, leader election), one test per sentence. Pre-vote and check-quorum are off
 * here: the paper describes plain Raft. Founders start at term 1 (the genesis snapshot), so a first election
 * is for term 2.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ELECTION_TICKS, Net, brief, makeLeader, msg, newRaft, take, tickN } from "./helpers.js";

for (const role of ["follower", "candidate", "leader"] as const) {
  test(`§5.1 if one server's current term is smaller than the other's, it updates its current term to the larger value (${role})`, () => {
    const r = newRaft(1, [1, 2, 3]);
    if (role === "candidate") r.becomeCandidate();
    if (role === "leader") makeLeader(r);
    const before = r.term;
    r.step(msg("MsgApp", 2, 1, before + 5));
    assert.equal(r.term, before + 5);
    assert.equal(r.lead, 2, "a MsgApp of a newer term names its sender leader");
  });
}

for (const role of ["candidate", "leader"] as const) {
  test(`§5.1 if a candidate or leader discovers that its term is out of date, it immediately reverts to follower state (${role})`, () => {
    const r = newRaft(1, [1, 2, 3]);
    if (role === "candidate") r.becomeCandidate();
    else makeLeader(r);
    r.step(msg("MsgHeartbeat", 2, 1, r.term + 1));
    assert.equal(r.role, "follower");
  });
}

test("§5.1 if a server receives a request with a stale term number, it rejects the request", () => {
  const r = newRaft(1, [1, 2, 3]);
  r.becomeFollower(5, 2);
  const lastIndex = r.log.lastIndex();
  r.step(msg("MsgApp", 3, 1, 4, { index: lastIndex, logTerm: 1, entries: [{ index: lastIndex + 1, term: 4, type: "normal", data: new Uint8Array(0) }] }));
  assert.equal(r.log.lastIndex(), lastIndex, "entries from a stale leader are not appended");
  assert.equal(r.lead, 2, "a stale leader is not followed");
  r.step(msg("MsgVote", 3, 1, 4, { index: 99, logTerm: 4 }));
  assert.equal(r.vote, 0, "no vote is granted for a stale term");
  assert.deepEqual(take(r), [], "plain Raft ignores stale requests without answering");
});

test("§5.2 when servers start up, they begin as followers", () => {
  const r = newRaft(1, [1, 2, 3]);
  assert.equal(r.role, "follower");
  assert.equal(r.lead, 0);
});

test("§5.2 leaders send periodic heartbeats (AppendEntries RPCs that carry no log entries) to all followers", () => {
  const r = newRaft(1, [1, 2, 3]);
  makeLeader(r);
  r.tick();
  const ms = take(r);
  assert.deepEqual(brief(ms), ["1->2 MsgHeartbeat t2 i0 lt0 c0", "1->3 MsgHeartbeat t2 i0 lt0 c0"]);
  assert.ok(ms.every((m) => !m.entries || m.entries.length === 0));
});

for (const role of ["follower", "candidate"] as const) {
  test(`§5.2 if a ${role} receives no communication over an election timeout, it begins an election: increments its term, becomes candidate, votes for itself and issues RequestVote RPCs in parallel`, () => {
    const r = newRaft(1, [1, 2, 3]);
    if (role === "follower") r.becomeFollower(1, 2);
    else r.becomeCandidate();
    const term = r.term;
    tickN(r, 2 * ELECTION_TICKS);
    assert.equal(r.role, "candidate");
    assert.equal(r.term, term + 1);
    assert.equal(r.vote, 1);
    assert.deepEqual(brief(take(r)), [`1->2 MsgVote t${term + 1} i1 lt1 c0`, `1->3 MsgVote t${term + 1} i1 lt1 c0`]);
  });
}

test("§5.2 a candidate wins an election if it receives votes from a majority of the servers in the full cluster for the same term", () => {
  const cases: { size: number; grants: number[]; rejects: number[]; role: string }[] = [
    { size: 1, grants: [], rejects: [], role: "leader" },
    { size: 3, grants: [2], rejects: [], role: "leader" },
    { size: 3, grants: [2, 3], rejects: [], role: "leader" },
    { size: 5, grants: [2, 3], rejects: [], role: "leader" },
    { size: 5, grants: [2, 3, 4, 5], rejects: [], role: "leader" },
    { size: 3, grants: [], rejects: [], role: "candidate" },
    { size: 5, grants: [2], rejects: [], role: "candidate" },
    { size: 5, grants: [], rejects: [2, 3], role: "candidate" },
  ];
  for (const c of cases) {
    const ids = Array.from({ length: c.size }, (_, k) => k + 1);
    const r = newRaft(1, ids);
    r.step(msg("MsgHup", 1, 1, 0));
    for (const id of c.grants) r.step(msg("MsgVoteResp", id, 1, r.term));
    for (const id of c.rejects) r.step(msg("MsgVoteResp", id, 1, r.term, { reject: true }));
    assert.equal(r.role, c.role, JSON.stringify(c));
    assert.equal(r.term, 2, JSON.stringify(c));
  }
});

test("§5.2 a candidate that receives vote denials from a majority returns to follower state", () => {
  for (const [size, rejects] of [[3, [2, 3]], [5, [2, 3, 4]]] as const) {
    const ids = Array.from({ length: size }, (_, k) => k + 1);
    const r = newRaft(1, ids);
    r.step(msg("MsgHup", 1, 1, 0));
    for (const id of rejects) r.step(msg("MsgVoteResp", id, 1, r.term, { reject: true }));
    assert.equal(r.role, "follower");
  }
});

test("§5.2 each server will vote for at most one candidate in a given term, on a first-come-first-served basis", () => {
  const cases = [
    { voted: 0, candidate: 2, granted: true },
    { voted: 0, candidate: 3, granted: true },
    { voted: 2, candidate: 2, granted: true },
    { voted: 3, candidate: 3, granted: true },
    { voted: 2, candidate: 3, granted: false },
    { voted: 3, candidate: 2, granted: false },
  ];
  for (const c of cases) {
    const r = newRaft(1, [1, 2, 3]);
    r.loadState({ term: 2, vote: c.voted, commit: 1 });
    r.step(msg("MsgVote", c.candidate, 1, 2, { index: 1, logTerm: 1 }));
    const [resp] = take(r);
    assert.equal(resp!.type, "MsgVoteResp");
    assert.equal(!resp!.reject, c.granted, JSON.stringify(c));
    assert.equal(r.vote, c.granted ? c.candidate : c.voted);
  }
});

test("§5.2 once a candidate wins an election, it becomes leader and sends heartbeat (empty or new-term) messages to all of the other servers", () => {
  const net = Net.of([1, 2, 3]);
  net.campaign(1);
  assert.equal(net.get(1).role, "leader");
  assert.deepEqual(net.leaders().map((r) => r.id), [1]);
  // Followers heard from the leader: they know who it is.
  assert.equal(net.get(2).lead, 1);
  assert.equal(net.get(3).lead, 1);
});

test("§5.2 a candidate that receives AppendEntries from a leader whose term is at least its own recognizes the leader and returns to follower state", () => {
  for (const term of [2, 3]) {
    const r = newRaft(1, [1, 2, 3]);
    r.step(msg("MsgHup", 1, 1, 0));
    assert.equal(r.role, "candidate");
    assert.equal(r.term, 2);
    r.step(msg("MsgApp", 2, 1, term, { index: 1, logTerm: 1 }));
    assert.equal(r.role, "follower");
    assert.equal(r.term, term);
    assert.equal(r.lead, 2);
  }
});

test("§5.2 if the term in the RPC is smaller than the candidate's current term, the candidate rejects the RPC and continues in candidate state", () => {
  const r = newRaft(1, [1, 2, 3]);
  r.becomeFollower(4, 0);
  r.step(msg("MsgHup", 1, 1, 0));
  assert.equal(r.term, 5);
  r.step(msg("MsgApp", 2, 1, 4, { index: 1, logTerm: 1 }));
  assert.equal(r.role, "candidate");
  assert.equal(r.term, 5);
});

test("§5.2 when votes split, each candidate times out and starts a new election by incrementing its term", () => {
  const net = Net.of([1, 2, 3, 4]);
  net.cut(1, 3);
  net.cut(1, 4);
  net.cut(2, 3);
  net.cut(2, 4);
  net.campaign(1);
  net.campaign(3);
  assert.equal(net.get(1).role, "candidate");
  assert.equal(net.get(3).role, "candidate");
  const r = net.get(1);
  const term = r.term;
  tickN(r, 2 * ELECTION_TICKS);
  assert.equal(r.role, "candidate");
  assert.equal(r.term, term + 1);
});

for (const role of ["follower", "candidate"] as const) {
  test(`§5.2 election timeouts are chosen randomly from a fixed interval (${role}): every value in [et, 2et) occurs`, () => {
    const r = newRaft(1, [1, 2, 3]);
    const seen = new Set<number>();
    for (let round = 0; round < 50 * ELECTION_TICKS; round++) {
      if (role === "follower") r.becomeFollower(r.term + 1, 2);
      else r.becomeCandidate();
      let ticks = 0;
      while (take(r).length === 0) {
        r.tick();
        ticks++;
      }
      seen.add(ticks);
    }
    for (let d = ELECTION_TICKS; d < 2 * ELECTION_TICKS; d++) assert.ok(seen.has(d), `timeout ${d} never drawn`);
    assert.ok([...seen].every((d) => d >= ELECTION_TICKS && d < 2 * ELECTION_TICKS));
  });
}

for (const role of ["follower", "candidate"] as const) {
  test(`§5.2 randomized timeouts spread out the servers so that in most cases only a single server times out (${role})`, () => {
    const rs = [1, 2, 3, 4, 5].map((id) => newRaft(id, [1, 2, 3, 4, 5]));
    let conflicts = 0;
    const rounds = 1000;
    for (let round = 0; round < rounds; round++) {
      for (const r of rs) {
        if (role === "follower") r.becomeFollower(r.term + 1, 0);
        else r.becomeCandidate();
      }
      let timedOut = 0;
      while (timedOut === 0) {
        for (const r of rs) {
          r.tick();
          if (take(r).length > 0) timedOut++;
        }
      }
      if (timedOut > 1) conflicts++;
    }
    assert.ok(conflicts / rounds <= 0.3, `conflict rate ${conflicts / rounds}`);
  });
}

test("§5.2 election safety: at most one leader can be elected in a given term", () => {
  // Two candidates in the same term, each reaching a different part of a 5-node cluster first.
  const net = Net.of([1, 2, 3, 4, 5]);
  net.cut(1, 4);
  net.cut(1, 5);
  net.cut(2, 4);
  net.cut(2, 5);
  net.campaign(1);
  net.campaign(4);
  const byTerm = new Map<number, number[]>();
  for (const r of net.leaders()) byTerm.set(r.term, [...(byTerm.get(r.term) ?? []), r.id]);
  for (const [term, ids] of byTerm) assert.equal(ids.length, 1, `term ${term} has leaders ${ids}`);
  assert.equal(net.get(1).role, "leader", "1 reached 2 and 3: a majority");
  assert.notEqual(net.get(4).role, "leader", "4 could reach 3 only after 3 voted for 1");
});
