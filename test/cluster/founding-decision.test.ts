/**
 * Deterministic founding in isolated-filesystem mode (src/main-thread/cluster/founding.ts): only the lowest node
 * id founds, only after the wait, only when every peer's id is known and none has a cluster; the operator's
 * explicit request founds unless a cluster answered; a cluster that refused this master is never forked; a master
 * that was a member (it holds other members' keys) never founds by itself.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { decideFounding, syncHoldsPromotion, type FoundingInput, type PeerAnswer } from "../../src/main-thread/cluster/founding.js";

const base = (peers: PeerAnswer[], over: Partial<FoundingInput> = {}): FoundingInput => ({ selfId: "m1", explicit: false, peers, sinceStartMs: 5_000, foundWaitMs: 3_000, ...over });
const noCluster = (address: string, id: string): PeerAnswer => ({ address, answer: "no-cluster", answeredId: id });

const table: Array<{ name: string; input: FoundingInput; act: "found" | "wait"; why: RegExp }> = [
  { name: "no peers: a one-master cluster", input: base([]), act: "found", why: /one-master/ },
  { name: "lowest id, every peer said no cluster: found", input: base([noCluster("b:1", "m2"), noCluster("c:1", "m3")]), act: "found", why: /lowest node id of m1, m2, m3/ },
  { name: "not the lowest: wait for the lowest to found", input: base([noCluster("a:1", "m0"), noCluster("c:1", "m3")]), act: "wait", why: /m0 has the lowest node id/ },
  { name: "string order, as Salt's founder choice: m10 sorts before m2", input: base([noCluster("a:1", "m10")], { selfId: "m2" }), act: "wait", why: /m10 has the lowest/ },
  { name: "before the wait is over: wait", input: base([noCluster("b:1", "m2")], { sinceStartMs: 1_000 }), act: "wait", why: /waiting 2 s/ },
  { name: "a silent peer with no configured id: wait and say what to do", input: base([{ address: "b:1", answer: "unreachable" }]), act: "wait", why: /did not answer with its node id.*brine_cluster_found/ },
  { name: "a silent peer with a configured higher id: found", input: base([{ address: "b:1", configuredId: "m2", answer: "unreachable" }]), act: "found", why: /lowest/ },
  { name: "a silent peer with a configured lower id: wait", input: base([{ address: "a:1", configuredId: "m0", answer: "none" }]), act: "wait", why: /m0 has the lowest/ },
  { name: "a peer with a cluster refused us: never found", input: base([{ address: "b:1", answer: "refused", refusal: "secret" }, noCluster("c:1", "m3")]), act: "wait", why: /a cluster exists but refused this master: b:1 \(secret\)/ },
  { name: "explicit founding with silent peers: found", input: base([{ address: "b:1", answer: "unreachable" }], { explicit: true, sinceStartMs: 0 }), act: "found", why: /brine_cluster_found/ },
  { name: "a former member (it holds other members' keys) never founds, even as the lowest id", input: base([noCluster("b:1", "m2")], { formerMemberKeys: 2 }), act: "wait", why: /was a member .* never founds by itself/ },
  { name: "a former member with no peers does not found either", input: base([], { formerMemberKeys: 1 }), act: "wait", why: /rejoins through a member/ },
  { name: "explicit founding overrides a former membership", input: base([], { formerMemberKeys: 1, explicit: true }), act: "found", why: /brine_cluster_found/ },
  { name: "explicit founding never forks a cluster that answered", input: base([{ address: "b:1", answer: "refused", refusal: "fingerprint" }], { explicit: true }), act: "wait", why: /fingerprint/ },
];

for (const c of table) {
  test(`founding: ${c.name}`, () => {
    const d = decideFounding(c.input);
    assert.equal(d.act, c.act, d.why);
    assert.match(d.why, c.why);
  });
}

test("a joiner's state-sync holds its promotion only while a channel did not finish, never for items refused here", () => {
  const rows: [string, Parameters<typeof syncHoldsPromotion>[0], boolean][] = [
    ["everything pulled", { errors: [] }, false],
    ["a channel stopped before its end", { failed: ["file_roots"], errors: [] }, true],
    ["a channel stopped, items refused too", { failed: ["keys"], errors: ["minions/x: not a key"] }, true],
    // a saltenv this master does not serve, a non-key at the source: a retry would refuse them again
    ["only items refused here", { errors: ["file_roots/dev/top.sls: saltenv dev is not served here"] }, false],
    ["an empty failed list", { failed: [], errors: ["bad path"] }, false],
  ];
  for (const [name, report, holds] of rows) assert.equal(syncHoldsPromotion(report) !== undefined, holds, name);
});
