/**
 * The LMDB backend's background commit (a leader's own appends, written on LMDB's write thread while the
 * Raft thread goes on): durable and readable after a reopen, in call order with the commits waited for on
 * the thread, and refused for anything but appends and state (a group's creation, a snapshot or a drop reads
 * key ranges and is always waited for).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { isBrineError } from "../../src/shared/errors.js";
import { LmdbBackend } from "../../src/workers/raft/lmdb-backend.js";
import type { DurableState, GroupMeta, GroupWrite } from "../../src/workers/raft/backend.js";
import type { Entry } from "../../src/workers/raft/core/types.js";

const META: GroupMeta = { id: "cluster", kind: "cluster", founders: ["a", "b", "c"] };
const entry = (index: number, term = 2): Entry => ({ term, index, type: "normal", data: Uint8Array.of(index & 0xff) });
const state = (commit: number, term = 2): DurableState => ({ hardState: { term, vote: 0, commit }, confState: { voters: [1, 2, 3], learners: [], confIndex: 0 } });

function genesis(): GroupWrite {
  const snapshot = { metadata: { index: 1, term: 1, confState: { voters: [1, 2, 3], learners: [], confIndex: 0 } }, data: new Uint8Array(0) };
  return { group: "cluster", meta: META, snapshot, dropFrom: 0, entries: [], state: state(1, 1) };
}

test("background commits land in call order and survive a reopen, a waited-for commit after them builds on them, and they take only appends and state", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-bg-"));
  try {
    let b = new LmdbBackend(dir, 16 * 1024 * 1024);
    await b.commit([genesis()]);
    // three background commits in flight at once, then a waited-for one that replaces the suffix from 4
    const bg = [
      b.commitInBackground([{ group: "cluster", entries: [entry(2), entry(3)], state: state(1) }]),
      b.commitInBackground([{ group: "cluster", entries: [entry(4)], state: state(2) }]),
      b.commitInBackground([{ group: "cluster", entries: [entry(5)], state: state(3) }]),
    ];
    await Promise.all(bg);
    await b.commit([{ group: "cluster", dropFrom: 4, entries: [entry(4, 3)], state: state(3, 3) }]);
    await assert.rejects(
      b.commitInBackground([{ group: "cluster", snapshot: genesis().snapshot!, entries: [] }]),
      (e) => isBrineError(e, "RAFT_STORAGE"),
    );
    await assert.rejects(b.commitInBackground([{ group: "cluster", dropThrough: 2, entries: [] }]), (e) => isBrineError(e, "RAFT_STORAGE"));
    await b.close();
    b = new LmdbBackend(dir, 16 * 1024 * 1024);
    const g = b.load("cluster")!;
    assert.deepEqual(g.entries.map((e) => `${e.index}/${e.term}`), ["2/2", "3/2", "4/3"], "the waited-for commit ran before a background one, or a background write was lost");
    assert.deepEqual(g.state.hardState, { term: 3, vote: 0, commit: 3 });
    await b.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
