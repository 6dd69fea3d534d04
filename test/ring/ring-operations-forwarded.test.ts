/**
 * Operating a named ring from every master, in-process (three GroupManagers over the test transport, each
 * with the RingForwarder the Raft worker runs, over an in-memory peer request channel):
 * - a ring created on two of three masters runs its own group on those two only;
 * - its policy is changed from the third master (which does not host it): the proposal is forwarded to a
 *   founder, commits in the ring's own log, and the answer is the committed ProposeResult;
 * - partial updates keep the other knob; reads are forwarded too;
 * - an unreachable founder is skipped; a destroyed ring answers CLUSTER_NO_SUCH_RING;
 * - re-creating the ring resumes its group from disk: the policy set before the destroy is back.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BrineError, isBrineError } from "../../src/shared/errors.js";
import { RingForwarder, RING_CALL_CHANNEL, checkRingCall, type RingCallChannel } from "../../src/workers/raft/ring-forward.js";
import { PeerRemoteError, type PeerMessage } from "../../src/workers/raft/peer/peer-types.js";
import type { RingConfigSnapshot } from "../../src/workers/raft/state-machines/ring-config.js";
import { TestCluster } from "../raft-worker/harness.js";

/** Peer requests between in-process nodes, with the transport's error shapes; `down` peers cannot be reached. */
class Channels {
  readonly handlers = new Map<string, (m: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>>();
  readonly down = new Set<string>();
  /** calls answered RAFT_UNKNOWN_GROUP first, as by founders that have not applied the ring's registry entry */
  lagging = 0;
  readonly asked: string[] = [];
  for(self: string): RingCallChannel {
    return {
      on: (channel, h) => {
        assert.equal(channel, RING_CALL_CHANNEL);
        this.handlers.set(self, h);
        return () => this.handlers.delete(self);
      },
      request: async (peer, channel, payload) => {
        this.asked.push(peer);
        if (this.down.has(peer)) throw new BrineError("CLUSTER_PEER_DOWN", `${peer} is down`);
        if (this.lagging > 0) {
          this.lagging--;
          throw new PeerRemoteError(peer, "RAFT_UNKNOWN_GROUP", `jobs is not hosted on ${peer}`);
        }
        const h = this.handlers.get(peer);
        if (!h) throw new BrineError("CLUSTER_PEER_UNKNOWN", peer);
        try {
          return (await h({ from: self, channel, payload, request: true })) as Uint8Array;
        } catch (e) {
          throw new PeerRemoteError(peer, isBrineError(e) ? e.code : "CLUSTER_PEER_REMOTE", (e as Error).message);
        }
      },
    };
  }
}

test("a ring is created, set from a master outside it, destroyed and re-created with its state", { timeout: 120_000 }, async () => {
  await TestCluster.run(["node-a", "node-b", "node-c"], {}, async (c, leader) => {
    const ch = new Channels();
    const fw = new Map([...c.nodes.values()].map((n) => [n.name, new RingForwarder(n.manager, ch.for(n.name), 30_000)]));
    const fromC = fw.get("node-c")!;

    const created = await leader.manager.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["node-a", "node-b"] } });
    assert.equal(created.applied, "applied");
    await c.waitFor("the jobs ring to elect a leader", () => c.leader("jobs"));
    await c.waitFor("node-c to apply the registry entry", () => c.node("node-c").manager.ringFounders("jobs"));
    assert.equal(c.node("node-c").manager.has("jobs"), false, "a non-founder never hosts the ring");
    assert.equal(fromC.forwards("jobs"), true);
    assert.equal(fw.get("node-a")!.forwards("jobs"), false, "a founder proposes locally");

    const set = await fromC.propose("jobs", { kind: "RING_CONFIG", value: { replicas: 2 } });
    assert.equal(set.group, "jobs");
    assert.equal(set.applied, "applied");
    assert.ok(set.index >= 1 && set.term >= 1);
    const half = await fromC.propose("jobs", { kind: "RING_CONFIG", value: { members: "voters" } });
    assert.ok(half.index > set.index);
    const policy = (await fromC.read("jobs", "ring_config")).value as RingConfigSnapshot;
    assert.deepEqual(policy, { members: "voters", replicas: 2, version: half.index }, "a partial update keeps the other knob");
    const members = (await fromC.read("jobs", "membership")).value as { voters: string[] };
    assert.deepEqual(members.voters, ["node-a", "node-b"]);

    // a founder that cannot be reached is skipped
    ch.down.add("node-a");
    ch.asked.length = 0;
    const again = await fromC.propose("jobs", { kind: "RING_CONFIG", value: { replicas: 1 } });
    assert.equal(again.applied, "applied");
    assert.deepEqual(ch.asked, ["node-a", "node-b"]);
    ch.down.clear();
    // founders that have not caught up with the registry yet are asked again, briefly
    ch.lagging = 5;
    await fromC.propose("jobs", { kind: "RING_CONFIG", value: { replicas: 2 } });
    assert.equal(ch.lagging, 0);

    // only RING_CONFIG crosses, only to ring groups
    assert.throws(() => checkRingCall({ op: "propose", group: "jobs", entry: { kind: "ROUTE", value: {} } }), /RING_CONFIG/);
    assert.throws(() => checkRingCall({ op: "read", group: "cluster", query: "registry" }), /ring group/);

    const destroyed = await leader.manager.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", status: "destroyed" } });
    assert.equal(destroyed.applied, "applied");
    await c.waitFor("the founders to stop the ring's group", () => !c.node("node-a").manager.has("jobs") && !c.node("node-b").manager.has("jobs"));
    await c.waitFor("node-c to apply the destroy", () => c.node("node-c").manager.ringFounders("jobs") === undefined);
    await assert.rejects(fromC.propose("jobs", { kind: "RING_CONFIG", value: { replicas: 1 } }), (e: Error) => isBrineError(e, "CLUSTER_NO_SUCH_RING"));

    await leader.manager.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["node-a", "node-b"] } });
    await c.waitFor("the re-created ring to elect a leader", () => c.leader("jobs"));
    await c.waitFor("node-c to see the ring again", () => c.node("node-c").manager.ringFounders("jobs"));
    const back = (await fromC.read("jobs", "ring_config")).value as RingConfigSnapshot;
    assert.deepEqual([back.members, back.replicas], ["voters", 2], "the re-created ring resumed its group's state from disk");
    for (const f of fw.values()) f.close();
  });
});
