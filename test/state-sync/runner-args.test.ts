/** cluster.sync_roots and cluster.collect_from_peers: Salt's arguments, refusals, and what they ask the state-sync thread. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MessageChannel } from "node:worker_threads";
import { stateSyncRunners } from "../../src/runners/cluster-sync.js";
import type { RunnerContext } from "../../src/runners/context.js";

function ctx(clustered: boolean, answer?: (call: unknown) => unknown): { ctx: RunnerContext; calls: unknown[]; close(): void } {
  const calls: unknown[] = [];
  const { port1, port2 } = new MessageChannel();
  port1.on("message", (m: { id: number; call: unknown }) => {
    calls.push(m.call);
    port1.postMessage({ id: m.id, v: answer?.(m.call) ?? {} });
  });
  const c = { cfg: { cluster_id: clustered ? "c1" : null }, cluster: { nodeId: "m1", stateSync: port2 } } as unknown as RunnerContext;
  return { ctx: c, calls, close: () => (port1.close(), port2.close()) };
}

test("sync_roots takes Salt's roots values and asks the state-sync thread for those channels; anything else is refused", async () => {
  const c = ctx(true, () => ({ m2: { items: 1, bytes: 2, deleted: 0, errors: [], ms: 3 } }));
  try {
    const run = stateSyncRunners["cluster.sync_roots"]!;
    assert.deepEqual(await run(c.ctx, [], {}), { m2: { items: 1, bytes: 2, deleted: 0, errors: [], ms: 3 } });
    await run(c.ctx, ["file"], {});
    await run(c.ctx, [], { roots: "pillar" });
    assert.deepEqual(c.calls, [
      { op: "sync_roots", channels: ["file_roots", "pillar_roots"], async: false },
      { op: "sync_roots", channels: ["file_roots"], async: false },
      { op: "sync_roots", channels: ["pillar_roots"], async: false },
    ]);
    await assert.rejects(run(c.ctx, ["everything"], {}), /roots must be "both", "file" or "pillar"/);
    const fired = (await run(c.ctx, [], { async: true })) as Record<string, unknown>;
    assert.equal(fired.status, "fan-out initiated");
    assert.equal(fired.cluster_id, "c1");
  } finally {
    c.close();
  }
});

test("collect_from_peers takes keys and denied_keys channels, job-cache banks (Salt's four by default) and the minion banks, and refuses the rest", async () => {
  const c = ctx(true);
  try {
    const run = stateSyncRunners["cluster.collect_from_peers"]!;
    await run(c.ctx, [], {});
    await run(c.ctx, [], { channels: "keys,denied_keys", banks: [] });
    await run(c.ctx, [["keys"]], { banks: "jobs/returns" });
    assert.deepEqual(c.calls, [
      { op: "collect", channels: ["bank:jobs/loads", "bank:jobs/minions", "bank:jobs/endtimes", "bank:jobs/nocache"], async: false },
      { op: "collect", channels: ["keys", "denied_keys"], async: false },
      { op: "collect", channels: ["keys", "bank:jobs/returns"], async: false },
    ]);
    await assert.rejects(run(c.ctx, [], { channels: "file_roots" }), /channels may only name keys and denied_keys/);
    await assert.rejects(run(c.ctx, [], { banks: "minions/nothing" }), /unknown bank "minions\/nothing"/);
    // the minion banks are the Raft worker's to pull (minion-placement.ts): without one, refused, nothing asked
    await assert.rejects(run(c.ctx, [], { banks: "minions/data" }), /the Raft worker is not running/);
    assert.equal(c.calls.length, 3);
    await assert.rejects(run(c.ctx, [], { banks: [] }), /name at least one channel or bank/);
  } finally {
    c.close();
  }
});

test("without cluster_id both runners answer Salt's skipped shape and ask nothing", async () => {
  const c = ctx(false);
  try {
    assert.deepEqual(await stateSyncRunners["cluster.sync_roots"]!(c.ctx, [], {}), { status: "skipped", reason: "cluster_id is not set" });
    assert.deepEqual(await stateSyncRunners["cluster.collect_from_peers"]!(c.ctx, [], {}), { status: "skipped", reason: "cluster_id is not set" });
    assert.deepEqual(c.calls, []);
  } finally {
    c.close();
  }
});
