/**
 * Presence under grains placement (PlacedAddresses, src/lib/targeting/cluster.ts): the addresses of minions whose
 * data lives on other masters are asked once (only ipv4/ipv6 travel) and kept ten seconds, so a master can still
 * match the connections of minions it holds no grains for.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { PlacedAddresses, addressesKeepMs, type ClusterMinions } from "../../src/lib/targeting/cluster.js";
import type { MinionQuery } from "../../src/shared/minion-placement.js";
import { addressesOnly } from "../../src/shared/minion-placement.js";

function fake(placed: boolean) {
  let now = 0;
  const asked: MinionQuery[] = [];
  const cluster: ClusterMinions = {
    placed: () => placed,
    warn: () => undefined,
    ask: async (q: MinionQuery) => {
      asked.push(q);
      return { records: [{ k: "data", id: "there", t: 1, o: "m2", v: { grains: { ipv4: ["10.0.0.2"] } } }], unreachable: {} };
    },
  };
  const local = (id: string) => (id === "here" ? { ipv4: ["10.0.0.1"] } : undefined);
  return { pa: new PlacedAddresses(local, () => cluster, () => now), asked, tick: (ms: number) => (now += ms) };
}

test("the addresses of minions held on other masters are asked once for all, only ipv4/ipv6, and kept ten seconds", async () => {
  const f = fake(true);
  const pa = f.pa;
  const g = await pa.lookup(["here", "there", "nowhere"]);
  assert.deepEqual([g("here"), g("there"), g("nowhere")], [{ ipv4: ["10.0.0.1"] }, { ipv4: ["10.0.0.2"] }, undefined]);
  assert.deepEqual(f.asked, [{ op: "records", bank: "data", ids: ["there", "nowhere"], addrs: true }]);
  await pa.lookup(["here", "there", "nowhere"]);
  assert.equal(f.asked.length, 1, "kept: not asked again within ten seconds");
  f.tick(addressesKeepMs);
  await pa.lookup(["there"]);
  assert.equal(f.asked.length, 2, "asked again once kept ten seconds");
  assert.deepEqual(addressesOnly({ grains: { ipv4: ["1.2.3.4"], ipv6: [], os: "Debian", huge: "x".repeat(1000) }, pillar: { secret: 1 } }), { grains: { ipv4: ["1.2.3.4"], ipv6: [] } });
});

test("with grains not placed, presence reads this master's grains and asks nobody", async () => {
  const f = fake(false);
  const g = await f.pa.lookup(["here", "there"]);
  assert.deepEqual([g("here"), g("there")], [{ ipv4: ["10.0.0.1"] }, undefined]);
  assert.deepEqual(f.asked, []);
});
