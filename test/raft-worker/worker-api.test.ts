/**
 * The Raft worker thread through its messages (api.ts, the one port-call style), as the main thread
 * (ClusterNode) and runner threads (MessagePorts from runnerLink) use it: coded errors survive the thread
 * boundary, batches, ports that close, a call the worker does not know, and a master with peers that starts
 * without a cluster group until the founding call.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { ClusterNode } from "../../src/main-thread/cluster/cluster-node.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { BrineError } from "../../src/shared/errors.js";
import { RaftClient } from "../../src/workers/raft/client.js";
import type { FromRaft } from "../../src/workers/raft/api.js";
import { configureLogging } from "../../src/shared/log.js";

function config(dir: string, over: Partial<MasterConfig> = {}): MasterConfig {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });
  return { ...masterDefaults(), id: "node-w", interface: "127.0.0.1", cachedir: path.join(dir, "cache"), cluster_id: "cw", ...over };
}

test("coded errors cross the thread boundary; batches commit entry by entry", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-api-"));
  const node = await ClusterNode.start(config(dir));
  try {
    const raft = node.raft;
    const codeOf = async (p: Promise<unknown>) => {
      try {
        await p;
        return "resolved";
      } catch (e) {
        assert.ok(e instanceof BrineError, `a BrineError, got ${String(e)}`);
        return e.code;
      }
    };
    assert.equal(await codeOf(raft.propose("cluster", { kind: "CONFIG", value: { voters: ["x"], learners: [] } })), "CLUSTER_WRONG_GROUP");
    assert.equal(await codeOf(raft.propose("nope", { kind: "ROUTE", value: { data_type: "a", ring_id: null } })), "RAFT_UNKNOWN_GROUP");
    assert.equal(await codeOf(raft.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "cluster", founding_voters: ["node-w"] } })), "CLUSTER_BAD_RING_ID");
    assert.equal(await codeOf(raft.read("cluster", "ring_config")), "CLUSTER_WRONG_GROUP");
    assert.equal(await codeOf(raft.changeMembership("cluster", { kind: "addLearner", node_id: "0.0.0.0" })), "CLUSTER_BAD_NODE_ID");

    const entries = Array.from({ length: 300 }, (_, i) => ({ kind: "ROUTE" as const, value: { data_type: `b${i % 7}`, ring_id: null } }));
    entries[150] = { kind: "ROUTE", value: { data_type: "bad name!", ring_id: null } };
    const results = await raft.proposeMany("cluster", entries);
    assert.equal(results.length, 300);
    const failed = results.filter((r) => r instanceof BrineError);
    assert.equal(failed.length, 1);
    assert.equal((results[150] as BrineError).code, "CLUSTER_BAD_ENTRY");
    const ok = results.filter((r): r is Exclude<typeof r, BrineError> => !(r instanceof BrineError));
    const indexes = ok.map((r) => r.index);
    assert.deepEqual(indexes, [...indexes].sort((a, b) => a - b), "log order follows the batch order");
    assert.equal(new Set(indexes).size, 299, "each entry is its own log entry");
    assert.ok(ok.every((r) => r.applied === "applied"));
  } finally {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a runner's port: live reads in parallel with the main thread; calls fail with RAFT_STOPPED once the worker is gone", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-port-"));
  const node = await ClusterNode.start(config(dir));
  const link = node.runnerLink()!;
  const runner = new RaftClient(link.raftPort);
  try {
    const ring = new RingReader(link.ringBuffer);
    assert.deepEqual(ring.nodes(), ["node-w"]);
    const w = await node.raft.propose("cluster", { kind: "ROUTE", value: { data_type: "seen", ring_id: null } });
    const r = await runner.read("cluster", "routing");
    assert.ok(r.index >= w.index && "seen" in (r.value as { routes: object }).routes, "the port reads what the main thread wrote");
    assert.deepEqual(ring.routes(), { seen: null });
    const st = await runner.status();
    assert.equal(st.nodeId, "node-w");
    assert.equal(st.groups[0]!.leaderId, "node-w");
  } finally {
    await node.stop();
  }
  await assert.rejects(runner.status(), { code: "RAFT_STOPPED" });
  assert.equal(node.runnerLink(), undefined, "no links after stop");
  rmSync(dir, { recursive: true, force: true });
});

test("a call the worker does not know is answered with a coded error, and the port keeps serving", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-bad-"));
  const node = await ClusterNode.start(config(dir));
  const port = node.runnerLink()!.raftPort;
  try {
    const answers: FromRaft[] = [];
    const next = () => new Promise<FromRaft>((resolve) => port.once("message", resolve));
    for (const bad of [{ k: "nope", id: 7 }, { k: "propose", id: 8, group: "cluster", entries: "not a list" }]) {
      port.postMessage(bad);
      answers.push(await next());
    }
    assert.deepEqual(
      answers.map((a) => (a.k === "err" ? [a.id, a.code] : [a.id, a.k])),
      [
        [7, "RAFT_API_MISUSE"],
        [8, "RAFT_REJECTED"],
      ],
    );
    port.postMessage({ k: "status", id: 9 });
    const ok = await next();
    assert.equal(ok.k === "res" && ok.id === 9 && (ok.v as { nodeId: string }).nodeId, "node-w");
  } finally {
    port.close();
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("with cluster_peers: no cluster group until founded; founding is a pure function of the founders", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-peers-"));
  // short request deadline: with the peer absent nothing can commit, and we want the coded outcome quickly
  const node = await ClusterNode.start(config(dir, { cluster_peers: ["10.0.0.2"] }), { tickMs: 10, raft: { requestDeadlineTicks: 20 } });
  try {
    const ring = new RingReader(node.ringBuffer);
    assert.deepEqual((await node.raft.status()).groups, []);
    assert.deepEqual(ring.rings(), [], "nothing published before the founding");
    await assert.rejects(node.raft.read("cluster", "membership"), { code: "RAFT_UNKNOWN_GROUP" });
    // what the peer handshake will do once it knows the peer's node id
    assert.equal(await node.raft.bootstrap(["node-w", "node-peer"]), true);
    assert.equal(await node.raft.bootstrap(["node-w", "node-peer"]), false);
    assert.deepEqual(ring.nodes(), ["node-peer", "node-w"], "the ring follows the founding voters at once");
    const st = (await node.raft.status()).groups[0]!;
    assert.deepEqual(st.voters, ["node-peer", "node-w"]);
    assert.notEqual(st.role, "leader", "one of two voters cannot lead alone");
    // no quorum: a proposal ends with a coded outcome, not a hang; a stale read still answers
    await assert.rejects(node.raft.propose("cluster", { kind: "ROUTE", value: { data_type: "x", ring_id: null } }), (e: BrineError) =>
      ["RAFT_NO_LEADER", "RAFT_UNKNOWN"].includes(e.code),
    );
    const stale = await node.raft.read("cluster", "membership", { stale: true });
    assert.equal(stale.linearizable, false);
    assert.deepEqual((stale.value as { voters: string[] }).voters, ["node-peer", "node-w"]);
  } finally {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("handOff through the worker's port: a single master has nobody to hand to, keeps leading and commits; status reports the Raft thread's CPU and, asked with brine_raft_stage_clock, its stages", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-api-"));
  const node = await ClusterNode.start(config(dir, { brine_raft_stage_clock: true }));
  try {
    await node.raft.handOff();
    const st = await node.raft.status();
    assert.equal(st.groups.find((g) => g.group === "cluster")?.role, "leader");
    const r = await node.raft.propose("cluster", { kind: "ROUTE", value: { data_type: "after_handoff", ring_id: null } });
    assert.ok(r.index > 0);
    // the proposal went through the worker's port, a pump iteration and a durable commit: each stage counted it
    const staged = (await node.raft.status()).stages!;
    for (const k of ["port.call", "pump.step", "pump.ready", "pump.deliver", "lmdb.commit"]) {
      assert.ok((staged[k]?.n ?? 0) > (st.stages![k]?.n ?? 0), `stage ${k} ran for the proposal`);
    }
    assert.ok(staged["loop.active"]!.us > 0, "the event loop's utilisation");
    if (process.platform === "linux") {
      const later = await node.raft.status();
      assert.ok(later.thread && later.thread.runNs > 0, "the Raft thread's time on a CPU, from /proc/thread-self/schedstat");
      assert.ok(later.thread.runNs >= st.thread!.runNs);
    }
  } finally {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("without brine_raft_stage_clock the Raft thread times no stage: its status carries only the event loop's utilisation", { timeout: 60_000 }, async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-api-"));
  const node = await ClusterNode.start(config(dir));
  try {
    const r = await node.raft.propose("cluster", { kind: "ROUTE", value: { data_type: "unstaged", ring_id: null } });
    assert.ok(r.index > 0);
    const stages = (await node.raft.status()).stages!;
    assert.deepEqual(Object.keys(stages).sort(), ["loop.active", "loop.idle"]);
    assert.ok(stages["loop.active"]!.us > 0, "the event loop's utilisation is still there");
  } finally {
    await node.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("brine_raft_leader_write reaches the Raft thread: a leader waits for its own write unless told to write it in the background", { timeout: 60_000 }, async () => {
  for (const [over, want] of [[{}, "waited"], [{ brine_raft_leader_write: "background" }, "background"]] as const) {
    const dir = mkdtempSync(path.join(os.tmpdir(), "brine-raft-api-"));
    const node = await ClusterNode.start(config(dir, over));
    try {
      assert.equal((await node.raft.status()).leaderWrite, want);
    } finally {
      await node.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
