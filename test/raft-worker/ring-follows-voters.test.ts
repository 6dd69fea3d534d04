/**
 * A ring's voters follow the cluster's (GroupManager.followRingVoters, ring-sync.ts ringVoterChange): a founder
 * removed from the cluster leaves the ring's group (its slots go to the others), and comes back when it is a
 * cluster voter again; the leader deciding never removes itself; nothing changes while they agree.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ringVoterChange } from "../../src/workers/raft/ring-sync.js";
import { TestCluster } from "./harness.js";

test("ringVoterChange: remove a ring voter the cluster lost (never the deciding leader, never the last), then add back a founder", () => {
  const F = ["a", "b", "c"];
  assert.equal(ringVoterChange(F, ["a", "b", "c", "d"], ["a", "b", "c"], "a"), undefined, "a cluster voter that is no founder does not join the ring");
  assert.deepEqual(ringVoterChange(F, ["a", "b"], ["a", "b", "c"], "a"), { kind: "removeNode", node_id: "c" });
  assert.equal(ringVoterChange(F, ["a", "b"], ["a", "b", "c"], "c"), undefined, "the leader does not remove itself");
  assert.equal(ringVoterChange(["c"], ["a"], ["c"], "a"), undefined, "the last ring voter stays");
  assert.deepEqual(ringVoterChange(F, ["a", "b", "c"], ["a", "b"], "a"), { kind: "addVoter", node_id: "c" });
  assert.equal(ringVoterChange(F, [], ["a", "b"], "a"), undefined, "no cluster voters known yet: no change");
  assert.deepEqual(ringVoterChange(F, ["a"], ["a", "b", "c"], "a"), { kind: "removeNode", node_id: "b" }, "one change at a time");
});

test("a founder removed from the cluster leaves the ring's group, and is back once it is a cluster voter again", { timeout: 120_000 }, async () => {
  await TestCluster.run(["r1", "r2", "r3"], { seed: 7 }, async (c, leader) => {
    await leader.manager.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["r1", "r2", "r3"] } });
    const ringLeader = await c.waitFor("a leader of ring jobs", () => c.leader("jobs"));
    const ringVoters = (n: string) => c.node(n).manager.status().groups.find((g) => g.group === "jobs")?.voters.join(",");
    assert.deepEqual(await ringLeader.manager.followRingVoters(), [], "the ring's voters are the cluster's: nothing to do");

    // remove a founder that does not lead the ring from the cluster
    const gone = ["r1", "r2", "r3"].find((n) => n !== ringLeader.name)!;
    const stay = ["r1", "r2", "r3"].filter((n) => n !== gone);
    const clusterLeader = await c.waitFor("a cluster leader", () => c.leader());
    await clusterLeader.manager.changeMembership("cluster", { kind: "removeNode", node_id: gone });
    await c.waitFor(`${ringLeader.name} to apply the cluster without ${gone}`, () => !ringLeader.manager.status().groups.find((g) => g.group === "cluster")!.voters.includes(gone));
    const made = await ringLeader.manager.followRingVoters();
    assert.deepEqual(made, [{ ring: "jobs", change: { kind: "removeNode", node_id: gone } }]);
    for (const n of stay) await c.waitFor(`${n} to see ring jobs without ${gone}`, () => ringVoters(n) === stay.join(","));
    assert.deepEqual(await ringLeader.manager.followRingVoters(), [], "done: nothing more to change");

    // back in the cluster: back in the ring
    const cl2 = await c.waitFor("a cluster leader", () => c.leader());
    await cl2.manager.changeMembership("cluster", { kind: "addVoter", node_id: gone });
    await c.waitFor(`${ringLeader.name} to apply the cluster with ${gone}`, () => ringLeader.manager.status().groups.find((g) => g.group === "cluster")!.voters.includes(gone));
    const rl = await c.waitFor("a leader of ring jobs", () => c.leader("jobs"));
    assert.deepEqual(await rl.manager.followRingVoters(), [{ ring: "jobs", change: { kind: "addVoter", node_id: gone } }]);
    for (const n of stay) await c.waitFor(`${n} to see ${gone} back in ring jobs`, () => ringVoters(n) === "r1,r2,r3");
  });
});
