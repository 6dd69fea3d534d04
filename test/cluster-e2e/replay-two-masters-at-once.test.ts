/**
 * A captured minion frame sent to two masters of a cluster at the same instant is accepted by exactly one
 * (issue #13's last hole; the Python master checks no nonce at all, so it accepts every copy everywhere): three
 * masters behind HAProxy, each with its own `cachedir`, real processes. Each master that does not own the
 * minion on the `cluster` ring asks the one that does before it acts (src/shared/nonce-owner.ts).
 *
 * 1. Frames of a 3007-style (v3) and a 3006.8-style (v2) minion, each sent to two masters at once (every pair,
 *    the owner's and two non-owners'), 20 per protocol: one "accepted", one "bad load"; a third master refuses
 *    it afterwards. Both minions keep answering jobs through the balancer.
 * 2. (diagnostic) what a frame landing on a non-owner waits: one peer round trip more than on the owner.
 * 3. With the owner cut off (a partition), the next master in the minion's ring order decides for the other two:
 *    still exactly one accepts each frame.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { hashString } from "../../src/shared/sab-ring/hash.js";
import { ringSlots } from "../../src/shared/sab-ring/layout.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, frameAnswer as answer, minionEventFrame, minionThrough, skipReason, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.74";
const HOSTS = ["127.0.0.75", "127.0.0.76", "127.0.0.77"];
const TRIALS = 20;
const ACCEPTED = "accepted";
const REFUSED = '"bad load"';

/** A fresh request frame as the minion sends it (and as someone on the path captures it). */
function frame(m: TestMinion, protocol: "v3" | "v2"): Buffer {
  return minionEventFrame(m, protocol, newNonce(), `ro/replay/${protocol}`);
}

/** The same frame to two masters at the same instant: both answers. */
async function race(f: Buffer, a: string, b: string): Promise<[string, string]> {
  const [x, y] = await Promise.all([answer(a, f), answer(b, f)]);
  return [x, y];
}

test("a captured frame sent to two cluster masters at once is accepted by exactly one", { timeout: 240_000 }, async (t) => {
  const why = await skipReason(LB, HOSTS);
  if (why) {
    t.skip(why);
    return;
  }
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-replay-owner", privateCachedir: true });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(2);
    minions.push(minionThrough(LB, "ro-v3", keys[0]!), minionThrough(LB, "ro-v2", keys[1]!, undefined, { protocol: "v2" }));
    await Promise.all(minions.map((m) => m.start()));
    const byProtocol = { v3: minions[0]!, v2: minions[1]! };
    const pairs: [number, number][] = [
      [0, 1],
      [1, 2],
      [0, 2],
    ];

    await t.test("every pair of masters, 20 frames per protocol: one accepts, the other refuses, a third refuses afterwards", async () => {
      for (const p of ["v3", "v2"] as const) {
        for (let i = 0; i < TRIALS; i++) {
          const [a, b] = pairs[i % pairs.length]!;
          const third = 3 - a - b;
          const f = frame(byProtocol[p], p);
          const got = await race(f, HOSTS[a]!, HOSTS[b]!);
          assert.deepEqual([...got].sort(), [ACCEPTED, REFUSED].sort(), `${p} frame ${i} to m${a + 1} and m${b + 1} at once: ${got.join(", ")}`);
          assert.equal(await answer(HOSTS[third]!, f), REFUSED, `${p} frame ${i} replayed to m${third + 1} afterwards`);
        }
      }
      // a non-owner that lost a race was told by the owner (two non-owners race in one pair of every three)
      const told = h.masters.some((m) => /reused nonce [0-9a-f]{32} \(seen by the master that decides for ro-v/.test(readFileSync(m.logFile, "utf8")));
      assert.ok(told, "some master refused a frame on its decider's word");
      for (const m of h.masters) assert.doesNotMatch(readFileSync(m.logFile, "utf8"), /did not decide|undecided/, `${m.id} always had an answer`);
      // both minions keep working through the balancer (returns land on owners and non-owners alike)
      const r = await h.salt(0, ["-L", minions.map((m) => m.id).join(","), "test.ping", "--out", "json", "-t", "20"]);
      assert.equal(r.code, 0, r.stderr);
      for (const m of minions) assert.ok(r.stdout.includes(`"${m.id}": true`), `${m.id} answered: ${r.stdout}`);
    });

    // the owner as the founding table gives it (the three founded the cluster together: src/shared/sab-ring/assign.ts)
    const table = assignSlots(h.masters.map((m) => m.id));
    const owner = table.nodes[table.owners[hashString(byProtocol.v3.id) & (ringSlots - 1)]!]!;

    await t.test("a frame on a non-owner waits one peer round trip (diagnostic: median of 15 sequential frames per master)", async () => {
      const medians: string[] = [];
      for (const [i, host] of HOSTS.entries()) {
        const ms: number[] = [];
        for (let k = 0; k < 15; k++) {
          const f = frame(byProtocol.v3, "v3");
          const t0 = performance.now();
          assert.equal(await answer(host, f), ACCEPTED);
          ms.push(performance.now() - t0);
        }
        ms.sort((x, y) => x - y);
        medians.push(`m${i + 1}${h.masters[i]!.id === owner ? " (owner)" : ""} ${ms[7]!.toFixed(1)} ms`);
      }
      t.diagnostic(`one v3 request, connect to reply, load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}: ${medians.join(", ")}`);
    });

    await t.test("the owner cut off: the next master in the minion's ring order decides, still exactly one accepts", async () => {
      const cut = h.masters.findIndex((m) => m.id === owner);
      const [a, b] = [0, 1, 2].filter((i) => i !== cut) as [number, number];
      h.partition(cut);
      await sleep(1_000); // the chaos file is polled every 200 ms
      try {
        for (let i = 0; i < 10; i++) {
          const got = await race(frame(byProtocol.v3, "v3"), HOSTS[a]!, HOSTS[b]!);
          assert.deepEqual([...got].sort(), [ACCEPTED, REFUSED].sort(), `frame ${i} to m${a + 1} and m${b + 1} with ${owner} cut off: ${got.join(", ")}`);
        }
      } finally {
        h.heal();
      }
      await until("the cluster to heal", async () => ((await h.waitLeader([0, 1, 2], 3).catch(() => undefined)) ? true : undefined), 60_000, 1_000);
    });
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
