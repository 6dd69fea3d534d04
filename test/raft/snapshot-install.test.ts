/**
 * Log compaction and InstallSnapshot: only the committed, applied prefix may be compacted; a follower whose
 * next entry is gone gets the leader's snapshot in chunks of snapshotChunkBytes, reassembles it in order
 * (duplicates and reordering are answered with the offset it needs), installs it and continues from the log.
 * Salt's Raft snapshotted uncommitted entries, never truncated the persisted log, never sent InstallSnapshot
 * and did not persist a received one.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { Message, SnapshotChunk } from "../../src/workers/raft/core/types.js";
import { Env, electedEnv } from "./env.js";
import { entry, msg, newRaft, take } from "./helpers.js";

/** Node 3 misses entries while cut off; the leader then compacts past them. */
function laggard(extra = 5): Env {
  const env = electedEnv();
  env.partition([[1, 2], [3]]);
  for (let k = 0; k < extra; k++) env.propose(1, `v${k}`);
  env.stabilize();
  env.compact(1);
  env.heal();
  return env;
}

/** Heartbeat rounds until node 3 stops moving. */
function settle(env: Env, rounds = 6): void {
  for (let k = 0; k < rounds; k++) {
    env.tick(1, 1);
    env.stabilize();
  }
}

test("the application may compact only a committed prefix that a snapshot covers", () => {
  const s = MemoryStorage.bootstrap([1, 2, 3]);
  s.append([entry(2, 2), entry(3, 2), entry(4, 2)]);
  s.setHardState({ term: 2, vote: 1, commit: 3 });
  assert.throws(() => s.createSnapshot(4, { voters: [1, 2, 3], learners: [], confIndex: 0 }, new Uint8Array()), (e) =>
    isBrineError(e, "RAFT_UNAVAILABLE"),
  );
  assert.throws(() => s.compact(3), (e) => isBrineError(e, "RAFT_UNAVAILABLE"), "no snapshot covers index 3 yet");
  s.createSnapshot(3, { voters: [1, 2, 3], learners: [], confIndex: 0 }, new Uint8Array([7]));
  s.compact(3);
  assert.equal(s.firstIndex(), 4);
  assert.equal(s.term(3), 2, "the compacted boundary keeps its term");
  assert.throws(() => s.entries(3, 4, 1 << 20), (e) => isBrineError(e, "RAFT_COMPACTED"));
});

test("a follower behind the compacted log receives the snapshot in chunks of snapshotChunkBytes and installs it", () => {
  const env = laggard();
  settle(env);
  const leaderSnap = env.node(1).disk.snapshot();
  const follower = env.node(3);
  assert.equal(follower.disk.snapshot().metadata.index, leaderSnap.metadata.index, "snapshot persisted on the follower");
  assert.deepEqual([...follower.disk.snapshot().data], [...leaderSnap.data]);
  assert.equal(follower.app.digest(), env.node(1).app.digest());
  assert.equal(follower.app.applied, env.node(1).app.applied);
});

test("the snapshot travels as ceil(size / snapshotChunkBytes) chunks, each acknowledged before the next", () => {
  const env = laggard();
  const sent: Message[] = [];
  const origSent = env.sent.bind(env);
  env.sent = (node, m) => {
    if (m.type === "MsgSnap" || m.type === "MsgSnapResp") sent.push(m);
    origSent(node, m);
  };
  settle(env);
  const chunks = sent.filter((m) => m.type === "MsgSnap").map((m) => m.snapshot!);
  const total = env.node(1).disk.snapshot().data.length;
  assert.equal(chunks.length, Math.ceil(total / 64));
  assert.deepEqual(chunks.map((c) => c.offset), chunks.map((_, k) => k * 64));
  assert.ok(chunks.every((c) => c.data.length <= 64 && c.totalBytes === total));
  // Stop and wait: each chunk after the first follows an acknowledgement asking for exactly its offset.
  const asks = sent.filter((m) => m.type === "MsgSnapResp").map((m) => m.snapOffset);
  assert.deepEqual(asks, chunks.slice(1).map((c) => c.offset));
});

function chunk(index: number, term: number, offset: number, total: number, fill: number, len: number): SnapshotChunk {
  return {
    metadata: { index, term, confState: { voters: [1, 2, 3], learners: [], confIndex: 0 } },
    offset,
    totalBytes: total,
    data: new Uint8Array(len).fill(fill),
  };
}

test("a follower answers a duplicate or out-of-order chunk with the offset it needs, and assembles correctly", () => {
  const r = newRaft(3, [1, 2, 3], { limits: { snapshotChunkBytes: 4 } });
  const send = (c: SnapshotChunk) => {
    r.step(msg("MsgSnap", 1, 3, 2, { snapshot: c }));
    return take(r);
  };
  assert.equal(send(chunk(10, 2, 4, 12, 2, 4))[0]!.snapOffset, 0, "mid-stream chunk without a start: restart at 0");
  assert.equal(send(chunk(10, 2, 0, 12, 1, 4))[0]!.snapOffset, 4);
  assert.equal(send(chunk(10, 2, 0, 12, 1, 4))[0]!.snapOffset, 4, "duplicate of chunk 0");
  assert.equal(send(chunk(10, 2, 8, 12, 3, 4))[0]!.snapOffset, 4, "chunk 2 before chunk 1");
  assert.equal(send(chunk(10, 2, 4, 12, 2, 4))[0]!.snapOffset, 8);
  const done = send(chunk(10, 2, 8, 12, 3, 4));
  assert.equal(done[0]!.type, "MsgAppResp");
  assert.equal(done[0]!.index, 10);
  const snap = r.log.unstable.snapshot!;
  assert.deepEqual([...snap.data], [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3]);
  assert.equal(r.log.committed, 10);
});

test("a chunk of a different snapshot restarts the assembly only from offset 0", () => {
  const r = newRaft(3, [1, 2, 3]);
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(10, 2, 0, 8, 1, 4) }));
  take(r);
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(12, 2, 4, 8, 9, 4) }));
  assert.equal(take(r)[0]!.snapOffset, 0, "newer snapshot, mid-stream: ask for its start");
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(12, 2, 0, 8, 5, 4) }));
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(12, 2, 4, 8, 6, 4) }));
  assert.equal(r.log.unstable.snapshot!.metadata.index, 12);
  assert.deepEqual([...r.log.unstable.snapshot!.data], [5, 5, 5, 5, 6, 6, 6, 6]);
});

test("a snapshot at or below the follower's commit is not installed; the follower reports its commit", () => {
  const r = newRaft(3, [1, 2, 3]);
  r.step(msg("MsgApp", 1, 3, 2, { index: 1, logTerm: 1, entries: [entry(2, 2), entry(3, 2)], commit: 3 }));
  take(r);
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(2, 2, 0, 4, 1, 4) }));
  const [resp] = take(r);
  assert.equal(resp!.type, "MsgAppResp");
  assert.equal(resp!.index, 3);
  assert.equal(r.log.unstable.snapshot, undefined);
});

test("a snapshot larger than snapshotBytesMax is not buffered", () => {
  const r = newRaft(3, [1, 2, 3], { limits: { snapshotBytesMax: 1024, snapshotChunkBytes: 512 } });
  r.step(msg("MsgSnap", 1, 3, 2, { snapshot: chunk(10, 2, 0, 4096, 1, 512) }));
  assert.deepEqual(take(r), []);
  assert.equal(r.log.committed, 1);
});

test("a lost chunk is resent after snapshotResendTicks without an acknowledgement", () => {
  const env = laggard();
  const lost: Message[] = [];
  // Two heartbeat rounds make the leader probe node 3 and start the transfer; swallow the first chunk.
  for (let k = 0; k < 2; k++) {
    env.tick(1, 1);
    env.processReady(1);
    env.deliver([2, 3]);
    env.processReady(2);
    env.processReady(3);
    env.deliver([1]);
    env.processReady(1);
  }
  for (const m of env.queue) if (m.type === "MsgSnap") lost.push(m);
  assert.equal(lost.length, 1);
  env.queue = env.queue.filter((m) => m.type !== "MsgSnap");
  env.tick(1, 2);
  env.processReady(1);
  assert.equal(env.queue.filter((m) => m.type === "MsgSnap").length, 0, "not before snapshotResendTicks");
  env.tick(1, 1);
  env.processReady(1);
  const resent = env.queue.filter((m) => m.type === "MsgSnap");
  assert.equal(resent.length, 1);
  assert.equal(resent[0]!.snapshot!.offset, lost[0]!.snapshot!.offset);
  settle(env);
  assert.equal(env.node(3).app.applied, env.node(1).app.applied);
});

test("after installing a snapshot, the follower continues from the log entries after it", () => {
  const env = laggard();
  settle(env);
  env.propose(1, "after-snapshot");
  env.stabilize();
  env.heartbeat(1); // the commit index reaches it with the next heartbeat
  const last = env.appliedBy.get(3)!.at(-1)!;
  assert.equal(new TextDecoder().decode(last.data), "after-snapshot");
  assert.equal(last.index, env.node(1).disk.snapshot().metadata.index + 1);
});
