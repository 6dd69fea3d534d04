/**
 * Restart from disk: a node's groups, state machines and published ring come back from LMDB alone. The node
 * runs the real LmdbBackend and publishes to a real shared ring buffer; the "restart" is a new manager over
 * the same directory and a fresh buffer (a new process starts with an empty one).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import { LmdbBackend } from "../../src/workers/raft/lmdb-backend.js";
import { GroupManager } from "../../src/workers/raft/manager.js";
import type { NodeStatus } from "../../src/workers/raft/api.js";
import { TEST_LIMITS } from "./harness.js";

const SELF = "node-a";
/** small snapshot interval, so the restart goes through snapshot + compacted log + replay */
const LIMITS = { ...TEST_LIMITS, snapshotEveryEntries: 50, snapshotKeepEntries: 10 };

function open(dir: string): { m: GroupManager; reader: RingReader; writer: RingWriter } {
  const writer = RingWriter.attach(createRingBuffer());
  const m = new GroupManager({ self: SELF, backend: new LmdbBackend(dir, 64 * 1024 * 1024), ring: writer, limits: LIMITS });
  return { m, reader: new RingReader(writer.buffer), writer };
}

/** The parts of a status that must survive a restart (role/term/lastIndex move: a restarted node re-elects). */
function durablePart(s: NodeStatus) {
  return s.groups
    .map((g) => ({ group: g.group, kind: g.kind, voters: g.voters, learners: g.learners, ringEpoch: g.ringEpoch }))
    .sort((a, b) => (a.group < b.group ? -1 : 1));
}

function ringPicture(r: RingReader) {
  return r.rings().map((ring) => {
    const v = r.view(ring)!;
    return { ring, nodes: v.nodes, epoch: v.epoch, replicas: v.replicas, checksum: v.checksum };
  });
}

test("restart from LMDB restores every group (cluster and rings), their state machines and the shared ring", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-restart-"));
  try {
    let { m, reader, writer } = open(dir);
    assert.equal(await m.bootstrap([SELF]), true);
    await m.start();
    assert.deepEqual(reader.nodes(), [SELF], "the one-voter ring is published at start");
    assert.equal(reader.epoch(), 1);

    // two rings (one later destroyed), a policy change on one, routes, a learner, and enough entries for
    // several snapshots and compactions of the cluster log
    await m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: [SELF] } });
    await m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "old", founding_voters: [SELF] } });
    await m.idle();
    const rc = await m.propose("jobs", { kind: "RING_CONFIG", value: { members: "voters", replicas: 2 } });
    assert.equal(rc.applied, "applied");
    await m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "old", status: "destroyed" } });
    await m.propose("cluster", { kind: "ROUTE", value: { data_type: "jobs", ring_id: "jobs" } });
    await m.changeMembership("cluster", { kind: "addLearner", node_id: "node-b" });
    const filler = await Promise.all(
      Array.from({ length: 180 }, (_, i) => m.propose("cluster", { kind: "ROUTE", value: { data_type: `dt${i % 6}`, ring_id: i % 2 ? "jobs" : null } })),
    );
    await m.idle();
    const refused = await m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["node-z"] } });
    assert.equal(refused.applied, "refused", "re-founding an active ring with other founders is refused by the registry");
    assert.equal(refused.refusal?.code, "CLUSTER_RING_CONFLICT");
    await m.idle();

    const before = m.status();
    const cluster = before.groups.find((g) => g.group === "cluster")!;
    assert.ok(cluster.snapshotIndex >= 150, `snapshots were taken (snapshot index ${cluster.snapshotIndex})`);
    assert.ok(cluster.firstIndex > 100, `the log was compacted (first index ${cluster.firstIndex})`);
    assert.ok(filler.length === 180 && cluster.commit >= filler[filler.length - 1]!.index);
    const reads = {
      membership: (await m.read("cluster", "membership")).value,
      registry: (await m.read("cluster", "registry")).value,
      routing: (await m.read("cluster", "routing")).value,
      jobs: (await m.read("jobs", "ring_config")).value,
    };
    const ringsBefore = ringPicture(reader);
    assert.deepEqual(ringsBefore.map((r) => r.ring), ["cluster", "jobs"], "the destroyed ring is not published");
    const routesBefore = reader.routes();
    await m.close();
    writer.release();

    ({ m, reader, writer } = open(dir));
    assert.equal(await m.bootstrap([SELF]), false, "the cluster group is found on disk, not founded again");
    await m.start();
    assert.deepEqual(durablePart(m.status()), durablePart(before));
    assert.deepEqual(ringPicture(reader), ringsBefore, "same rings, nodes, epochs and slot tables");
    assert.deepEqual(reader.routes(), routesBefore);
    assert.deepEqual((await m.read("cluster", "membership")).value, reads.membership);
    assert.deepEqual((await m.read("cluster", "registry")).value, reads.registry);
    assert.deepEqual((await m.read("cluster", "routing")).value, reads.routing);
    assert.deepEqual((await m.read("jobs", "ring_config")).value, reads.jobs);
    assert.equal(m.has("old"), false, "a destroyed ring's group stays stopped");
    // the restarted groups lead again and take writes
    const after = await m.propose("jobs", { kind: "RING_CONFIG", value: { replicas: 1 } });
    assert.equal(after.applied, "applied");
    assert.equal(reader.view("jobs")!.replicas, 1);
    assert.ok(reader.epoch("jobs") > ringsBefore.find((r) => r.ring === "jobs")!.epoch, "a policy change is a new epoch");
    // re-creating the destroyed ring resumes its group from its files (Salt's behaviour)
    await m.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "old", founding_voters: [SELF] } });
    await m.idle();
    assert.equal(m.has("old"), true);
    const old = m.status().groups.find((g) => g.group === "old")!;
    // a fresh genesis would be at term 2 / index 2 after its first election; the resumed log is longer
    assert.ok(old.term >= 3 && old.lastIndex >= 3, `"old" resumed its log (term ${old.term}, last index ${old.lastIndex})`);
    assert.deepEqual(reader.rings(), ["cluster", "jobs", "old"]);
    await m.close();
    writer.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("quiescing: an idle one-voter group stops ticking normally and wakes on a proposal", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-quiesce-"));
  try {
    const { m, writer } = open(dir);
    await m.bootstrap([SELF]);
    await m.start();
    const quiesced = () => m.status().groups[0]!.quiesced;
    assert.equal(quiesced(), false);
    for (let i = 0; i < LIMITS.quiesceAfterTicks; i++) m.tick();
    await m.idle();
    assert.equal(quiesced(), true, `quiesced after ${LIMITS.quiesceAfterTicks} idle ticks`);
    const p = m.propose("cluster", { kind: "ROUTE", value: { data_type: "wake", ring_id: null } });
    assert.equal(quiesced(), false, "a proposal wakes the group at once");
    assert.equal((await p).applied, "applied");
    // a group with a learner has someone depending on its heartbeats: it never quiesces
    const added = await m.changeMembership("cluster", { kind: "addLearner", node_id: "node-b" });
    for (let i = 0; i < LIMITS.quiesceAfterTicks * 3; i++) m.tick();
    await m.idle();
    assert.equal(quiesced(), false);
    // the membership change became the CONFIG it amounts to, in the state machines the runners read
    assert.deepEqual((await m.read("cluster", "membership")).value, { voters: [SELF], learners: ["node-b"], version: added.index });
    const removed = await m.changeMembership("cluster", { kind: "removeNode", node_id: "node-b" });
    assert.deepEqual((await m.read("cluster", "membership")).value, { voters: [SELF], learners: [], version: removed.index });
    assert.deepEqual(m.status().groups[0]!.learners, [], "the core's configuration agrees");
    for (let i = 0; i < LIMITS.quiesceAfterTicks; i++) m.tick();
    await m.idle();
    assert.equal(quiesced(), true, "alone again: it quiesces");
    await m.close();
    writer.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the published cluster ring follows committed voters (a new epoch per change), not learners", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-ring-"));
  try {
    const { m, reader, writer } = open(dir);
    await m.bootstrap([SELF]);
    await m.start();
    const first = reader.view()!;
    assert.deepEqual(first.nodes, [SELF]);
    await m.changeMembership("cluster", { kind: "addLearner", node_id: "node-b" });
    assert.deepEqual(reader.nodes(), [SELF], "a learner does not own keys");
    assert.equal(reader.epoch(), first.epoch);
    // promoting it commits on the old configuration (one voter), then the ring has two owners
    const promoted = await m.changeMembership("cluster", { kind: "addVoter", node_id: "node-b" });
    assert.equal(promoted.applied, "applied");
    const second = reader.view()!;
    assert.deepEqual(second.nodes, ["node-b", SELF].sort());
    assert.equal(second.epoch, first.epoch + 1);
    assert.notEqual(second.checksum, first.checksum);
    const owners = new Set(second.owners);
    assert.equal(owners.size, 2, "both voters own slots");
    await m.close();
    writer.release();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
