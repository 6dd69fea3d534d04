/**
 * Single-server membership changes (thesis §4.1): one change in flight at a time, taking effect when the
 * entry commits (never at append: Salt's config-at-append plus several uncommitted CONFIGs is the unsafe
 * combination), with refusals that leave the cluster unable to lose its last voter or its leader.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { applyConfChange, decodeConfChange, encodeConfChange } from "../../src/workers/raft/core/confchange.js";
import type { RequestResult } from "../../src/workers/raft/core/types.js";
import { Env, electedEnv } from "./env.js";
import { msg, newRaft, storageWithLog, take } from "./helpers.js";

function cluster(joiners: number[] = []): Env {
  const env = electedEnv();
  for (const id of joiners) env.addJoiner(id);
  return env;
}


function failure(r: RequestResult | undefined): string {
  assert.ok(r, "a result was delivered");
  return r.ok ? "ok" : r.code;
}

test("conf changes round-trip through their entry encoding", () => {
  for (const kind of ["addVoter", "addLearner", "removeNode"] as const) {
    for (const node of [1, 4242, 2 ** 40 + 7]) {
      assert.deepEqual(decodeConfChange(encodeConfChange({ kind, node })), { kind, node });
    }
  }
  const withCtx = decodeConfChange(encodeConfChange({ kind: "addLearner", node: 9, context: new Uint8Array([1, 2]) }));
  assert.deepEqual([...withCtx.context!], [1, 2]);
});

test("applying a change: addVoter promotes a learner, addLearner demotes a voter, removeNode drops either", () => {
  let cs = { voters: [1, 2, 3], learners: [4], confIndex: 0 };
  cs = applyConfChange(cs, { kind: "addVoter", node: 4 }, 5);
  assert.deepEqual(cs, { voters: [1, 2, 3, 4], learners: [], confIndex: 5 });
  cs = applyConfChange(cs, { kind: "addLearner", node: 2 }, 6);
  assert.deepEqual(cs, { voters: [1, 3, 4], learners: [2], confIndex: 6 });
  cs = applyConfChange(cs, { kind: "removeNode", node: 2 }, 7);
  assert.deepEqual(cs, { voters: [1, 3, 4], learners: [], confIndex: 7 });
});

test("only one membership change may be in flight: a second one is refused with RAFT_CONF_IN_FLIGHT", () => {
  const env = cluster([4, 5]);
  const first = env.proposeConf(1, { kind: "addLearner", node: 4 });
  const second = env.proposeConf(1, { kind: "addLearner", node: 5 });
  env.stabilize();
  const results = env.takeResults(1);
  assert.equal(failure(results.find((r) => r.id === first)), "ok");
  assert.equal(failure(results.find((r) => r.id === second)), "RAFT_CONF_IN_FLIGHT");
  // Once the first is applied, the next one goes through.
  const third = env.proposeConf(1, { kind: "addLearner", node: 5 });
  env.stabilize();
  assert.equal(failure(env.takeResults(1).find((r) => r.id === third)), "ok");
  assert.deepEqual(env.rn(1).raft.confState.learners, [4, 5]);
});

test("a change takes effect when committed, not when appended", () => {
  const env = cluster([4]);
  env.partition([[1], [2, 3, 4]]);
  env.proposeConf(1, { kind: "addVoter", node: 4 });
  env.stabilize([1]);
  const r = env.rn(1).raft;
  assert.equal(r.log.lastIndex(), 3, "appended at 3");
  assert.deepEqual(r.confState.voters, [1, 2, 3], "but not in effect");
  assert.equal(r.prs.isVoter(4), false);
  env.heal();
  env.tick(1, 1);
  env.stabilize();
  env.tick(1, 1);
  env.stabilize();
  assert.deepEqual(r.confState.voters, [1, 2, 3, 4]);
});

test("a new leader proposes no change until it has applied every entry from earlier terms", () => {
  // Entries 2 and 3 (term 2) came from a previous leader; either could be a conf change.
  const r = newRaft(1, [1, 2, 3], { storage: storageWithLog([1, 2, 3], [2, 2], 2) });
  r.becomeCandidate();
  r.becomeLeader();
  take(r);
  assert.equal(r.pendingConfIndex, 3);
  const conf = (node: number) => [{ term: 0, index: 0, type: "conf" as const, data: encodeConfChange({ kind: "addLearner", node }) }];
  const early = r.acceptProposal(conf(4));
  assert.equal(early.ok ? "ok" : early.code, "RAFT_CONF_IN_FLIGHT");
  // The no-op commits and everything through it is handed to the application: now a change may go.
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: 4 }));
  const ents = r.log.nextCommittedEnts(1 << 20);
  r.handOutCommitted(ents);
  r.log.applyingTo(ents.at(-1)!.index);
  const later = r.acceptProposal(conf(4));
  assert.equal(later.ok ? "ok" : later.code, "ok");
  const again = r.acceptProposal(conf(5));
  assert.equal(again.ok ? "ok" : again.code, "RAFT_CONF_IN_FLIGHT", "and then only one");
});

test("the leader refuses to remove or demote itself (transfer leadership first)", () => {
  const env = cluster();
  env.proposeConf(1, { kind: "removeNode", node: 1 });
  env.proposeConf(2, { kind: "addLearner", node: 1 }); // forwarded: the leader decides
  env.stabilize();
  assert.equal(failure(env.takeResults(1)[0]), "RAFT_REJECTED");
  assert.equal(failure(env.takeResults(2)[0]), "RAFT_REJECTED");
  assert.deepEqual(env.rn(1).raft.confState.voters, [1, 2, 3]);
});

test("changes that make no sense are refused: removing a non-member, adding an existing voter", () => {
  const env = cluster();
  env.proposeConf(1, { kind: "removeNode", node: 9 });
  env.stabilize();
  env.proposeConf(1, { kind: "addVoter", node: 2 });
  env.stabilize();
  assert.deepEqual(env.takeResults(1).map(failure), ["RAFT_REJECTED", "RAFT_REJECTED"]);
});

test("quorum follows the configuration: after removing a voter, two of the remaining two are needed", () => {
  const env = cluster();
  env.proposeConf(1, { kind: "removeNode", node: 3 });
  env.stabilize();
  const r = env.rn(1).raft;
  assert.deepEqual(r.confState.voters, [1, 2]);
  // 3 is gone: it gets no more traffic, and its acknowledgements would not count.
  assert.equal(r.prs.get(3), undefined);
  env.partition([[1, 3], [2]]);
  env.propose(1, "x");
  env.stabilize([1, 3]);
  assert.ok(r.log.committed < r.log.lastIndex(), "leader alone is not a majority of {1,2}");
  r.step(msg("MsgAppResp", 3, 1, r.term, { index: r.log.lastIndex() }));
  assert.ok(r.log.committed < r.log.lastIndex(), "a removed node's acknowledgement is ignored");
});

test("a removed node's requests fail with RAFT_NOT_VOTER", () => {
  const env = cluster();
  env.proposeConf(1, { kind: "removeNode", node: 3 });
  env.stabilize();
  env.propose(3, "late");
  env.stabilize();
  assert.equal(failure(env.takeResults(3)[0]), "RAFT_NOT_VOTER");
});

test("committed conf entries replayed after a restart are not applied twice (membership stays as persisted)", () => {
  const env = cluster([4]);
  env.proposeConf(1, { kind: "addLearner", node: 4 });
  env.stabilize();
  env.proposeConf(1, { kind: "addVoter", node: 4 });
  env.stabilize();
  // Node 2 restarts with its state machine back at the genesis snapshot: entries 2.. are handed out again,
  // including addLearner(4). Replaying it must not demote 4 (the stored membership already has index 4).
  env.crash(2);
  env.restart(2);
  const r = env.rn(2).raft;
  assert.deepEqual(r.confState.voters, [1, 2, 3, 4]);
  env.processReady(2);
  assert.deepEqual(r.confState.voters, [1, 2, 3, 4]);
  assert.deepEqual(r.confState.learners, []);
  assert.equal(env.appliedBy.get(2)!.filter((e) => e.type === "conf").length, 4, "both changes applied twice by the app, once per life");
});
