/**
 * A follower that loses its transport session to the leader (the connection dropped: a crashed leader's kernel
 * closes its sockets at once) takes it as a strong hint: it stops honouring the leader's lease and campaigns in
 * 1 + rank ticks instead of a whole election timeout. Pre-vote and the other followers' lease keep a flapping
 * link from deposing a healthy leader. And the leader's pick of a successor when it stops on purpose.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { NONE } from "../../src/workers/raft/core/types.js";
import { type Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, msg } from "./helpers.js";

/** `n` ticks on node `id`, then its Ready (what it sends is in env.queue; nothing is delivered). */
function tick(env: Env, id: number, n = 1): void {
  env.tick(id, n);
  if (env.rn(id).hasReady()) env.processReady(id);
}

test("survivors of a crashed leader elect a new one within two ticks of losing its connection, not an election timeout", () => {
  const env = electedEnv([1, 2, 3, 4, 5]);
  const term = env.rn(1).raft.term;
  env.crash(1);
  for (const id of [2, 3, 4, 5]) env.rn(id).reportUnreachable(1);
  for (const id of [2, 3, 4, 5]) tick(env, id);
  assert.deepEqual(
    env.queue.map((m) => `${m.type} ${m.from}`).filter((x, i, a) => a.indexOf(x) === i),
    ["MsgPreVote 2"],
    "one tick later only the first-ranked survivor campaigns (the others wait their rank), so the vote does not split",
  );
  env.stabilize();
  assert.equal(env.leader(), 2);
  assert.equal(env.rn(2).raft.term, term + 1, "one election, one term");
  for (const id of [3, 4, 5]) assert.equal(env.rn(id).raft.lead, 2);
  // the others' early campaigns were called off by the new leader's word
  tick(env, 3, ELECTION_TICKS - 1);
  tick(env, 4, ELECTION_TICKS - 1);
  env.stabilize();
  assert.equal(env.leader(), 2);
  assert.equal(env.rn(2).raft.term, term + 1);
});

test("a survivor ranked second campaigns one tick after the first when the first did not", () => {
  const env = electedEnv();
  const term = env.rn(1).raft.term;
  env.crash(1);
  // only node 3 saw the connection drop; node 2 still counts on the leader's lease
  env.rn(3).reportUnreachable(1);
  tick(env, 3);
  assert.equal(env.queue.length, 0, "rank 1: not at the first tick");
  tick(env, 3);
  assert.deepEqual(env.queue.map((m) => `${m.type} ${m.from}`), ["MsgPreVote 3", "MsgPreVote 3"]);
  env.stabilize();
  assert.equal(env.leader(), undefined, "node 2 ignores a pre-vote while its lease from the leader holds");
  // node 2's own timer runs out (it heard nothing from the leader for an election timeout): it now grants
  tick(env, 2, ELECTION_TICKS);
  env.stabilize();
  assert.ok(env.leader() !== undefined);
  assert.equal(env.rn(env.leader()!).raft.term, term + 1);
});

test("a flapping link does not depose a healthy leader: the follower that lost its session pre-votes, nobody grants, the term stays", () => {
  const env = electedEnv();
  const term = env.rn(1).raft.term;
  env.rn(3).reportUnreachable(1);
  tick(env, 3, 2);
  assert.deepEqual(env.queue.map((m) => `${m.type} ${m.from}->${m.to}`), ["MsgPreVote 3->1", "MsgPreVote 3->2"]);
  env.stabilize();
  assert.equal(env.rn(3).raft.role, "pre-candidate", "no grant: the leader and node 2 are inside the lease");
  env.heartbeat(1);
  assert.equal(env.leader(), 1);
  for (const id of [1, 2, 3]) assert.equal(env.rn(id).raft.term, term, "no term was spent");
  assert.equal(env.rn(3).raft.role, "follower");
  assert.equal(env.rn(3).raft.lead, 1);
});

test("word from the leader after the hint calls the early campaign off", () => {
  const env = electedEnv();
  env.rn(2).reportUnreachable(1);
  env.heartbeat(1); // the session came back and the leader was heard from
  tick(env, 2, ELECTION_TICKS - 1);
  assert.equal(env.queue.length, 0, "the election timer started over at the heartbeat");
  assert.equal(env.rn(2).raft.role, "follower");
});

test("losing the session to a peer that is not the leader changes nothing for a follower", () => {
  const env = electedEnv();
  env.rn(2).reportUnreachable(3);
  tick(env, 2, ELECTION_TICKS - 1);
  assert.equal(env.queue.length, 0);
  assert.equal(env.rn(2).raft.role, "follower");
  // and the lease still holds: a pre-vote from 3 is ignored
  env.rn(2).step(msg("MsgPreVote", 3, 2, env.rn(2).raft.term + 1, { index: 10, logTerm: 10 }));
  assert.deepEqual(env.rn(2).raft.msgs, []);
});

test("the leader hands off to the voter holding the most of the log, preferring voters heard from, the lower id on a tie", () => {
  type Row = { name: string; match: Record<number, number>; active?: number[]; want: number };
  const rows: Row[] = [
    { name: "most caught up", match: { 2: 5, 3: 7 }, want: 3 },
    { name: "tie: lower id", match: { 2: 7, 3: 7 }, want: 2 },
    { name: "an active voter beats a silent one further ahead", match: { 2: 3, 3: 7 }, active: [2], want: 2 },
    { name: "among active voters, the most caught up", match: { 2: 3, 3: 7, 4: 6 }, active: [2, 4], want: 4 },
  ];
  for (const row of rows) {
    const env = electedEnv([1, ...Object.keys(row.match).map(Number)]);
    const rn = env.rn(1);
    for (const [id, match] of Object.entries(row.match)) {
      const pr = rn.raft.prs.get(Number(id))!;
      pr.match = match;
      pr.recentActive = row.active ? row.active.includes(Number(id)) : true;
    }
    assert.equal(rn.handOffTarget(), row.want, row.name);
  }
});

test("no hand-off target on a follower or for a sole voter", () => {
  assert.equal(electedEnv([1]).rn(1).handOffTarget(), NONE);
  const env = electedEnv();
  assert.equal(env.rn(1).handOffTarget() !== NONE, true);
  assert.equal(env.rn(2).handOffTarget(), NONE);
});
