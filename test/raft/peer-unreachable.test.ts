/**
 * What the transport's reachability reports do to a leader (etcd's ReportUnreachable, plus its reverse):
 * an unreachable follower stops receiving pipelined appends and is probed instead; reachable again, it is
 * probed at once. Other followers are not affected.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { bytes, makeLeader, msg, newRaft, persist, take } from "./helpers.js";
import type { Message } from "../../src/workers/raft/core/types.js";

/** A leader of [1, 2, 3] that both followers acknowledged, so both are being pipelined to (replicate). */
function pipeliningLeader() {
  const r = newRaft(1, [1, 2, 3]);
  makeLeader(r);
  for (const id of [2, 3]) r.step(msg("MsgAppResp", id, 1, r.term, { index: r.log.lastIndex() }));
  persist(r);
  take(r);
  assert.equal(r.prs.get(2)!.state, "replicate");
  return r;
}

function propose(r: ReturnType<typeof newRaft>, data: string): Message[] {
  r.tracker.add("propose", bytes(data));
  r.flushRequests();
  return take(r);
}

const appsTo = (ms: Message[], to: number) => ms.filter((m) => m.type === "MsgApp" && m.to === to);

test("an unreachable follower is probed instead of pipelined: one append until it answers, the others keep streaming", () => {
  const r = pipeliningLeader();
  // pipelining: every proposal goes out at once, without waiting for acknowledgements
  assert.equal(appsTo([...propose(r, "a"), ...propose(r, "b")], 2).length, 2);
  r.step(msg("MsgUnreachable", 2, 1, 0));
  assert.equal(r.prs.get(2)!.state, "probe");
  const sent = [...propose(r, "c"), ...propose(r, "d"), ...propose(r, "e")];
  assert.equal(appsTo(sent, 2).length, 1, "one probe, then nothing until follower 2 answers");
  assert.equal(appsTo(sent, 2)[0]!.index, 2, "the probe starts after what follower 2 acknowledged");
  assert.equal(appsTo(sent, 3).length, 3, "follower 3 is still pipelined");
  // follower 2 answers the probe: pipelining resumes from where it is
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: r.log.lastIndex() }));
  assert.equal(r.prs.get(2)!.state, "replicate");
  take(r);
  assert.equal(appsTo(propose(r, "f"), 2).length, 1);
});

test("a follower reachable again is probed at once, without waiting for its next heartbeat answer", () => {
  const r = pipeliningLeader();
  r.step(msg("MsgUnreachable", 2, 1, 0));
  propose(r, "a"); // the probe, lost with the session
  assert.equal(appsTo(propose(r, "b"), 2).length, 0, "paused while the probe is unanswered");
  r.step(msg("MsgReachable", 2, 1, 0));
  const probe = appsTo(take(r), 2);
  assert.equal(probe.length, 1, "a new probe as soon as the session is back");
  assert.equal(probe[0]!.entries?.length, 2, "it carries everything follower 2 lacks");
});

test("reachability reports change nothing for a follower being pipelined to, on a non-leader, or about an unknown node", () => {
  const r = pipeliningLeader();
  r.step(msg("MsgReachable", 3, 1, 0));
  assert.equal(r.prs.get(3)!.state, "replicate");
  assert.deepEqual(take(r), []);
  r.step(msg("MsgUnreachable", 9, 1, 0));
  r.step(msg("MsgReachable", 9, 1, 0));
  assert.deepEqual(take(r), []);
  const f = newRaft(2, [1, 2, 3]);
  f.step(msg("MsgUnreachable", 1, 2, 0));
  f.step(msg("MsgReachable", 1, 2, 0));
  assert.deepEqual(take(f), []);
  assert.equal(f.role, "follower");
});
