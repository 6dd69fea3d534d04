/**
 * A captured (or resent) minion frame sent to two masters of a cluster at the same instant is acted on by exactly
 * one (issue #13's last hole; the Python master checks no nonce at all, so it acts on every copy everywhere): three
 * masters behind HAProxy, each with its own `cachedir`, real processes. Each master that does not own the
 * minion on the `cluster` ring asks the one that does before it acts (src/shared/nonce-owner.ts); the one told
 * "seen" answers the copy with the reply the master that acted gave it (src/main-thread/cluster/resend-replies.ts).
 *
 * 1. Frames of a 3007-style (v3) and a 3006.8-style (v2) minion, each sent to two masters at once (every pair,
 *    the owner's and two non-owners'), 20 per protocol: both answered with the same reply, the event fired once
 *    (counted on a master's bus, where every master's events arrive); a third master answers the same bytes
 *    afterwards and refuses the nonce sealed again. Both minions keep answering jobs through the balancer.
 * 2. (diagnostic) what a frame landing on a non-owner waits: one peer round trip more than on the owner.
 * 3. With the owner cut off (a partition), the next master in the minion's ring order decides for the other two:
 *    still each frame acted on once.
 * A frame acted on twice is a bug only when no master accepted a frame undecided: a non-owner that has no verdict
 * within `brine_cluster_replay_owner_wait_ms` (250 ms) accepts without it, by design, counted and logged (a loaded
 * box gets there: 3 of 20 frames at load 30), and then passes that decider over for 2 s, asking the next master in
 * the minion's ring order while the others still ask the owner: what that stand-in lets through is counted too (a
 * fresh-clone run at load 15 had 13 doubles against 3 undecided before it was). So doubles are counted, and after
 * the masters stopped there must be no more of them than the acceptances without the owner's word their stop lines
 * count.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { hashString } from "../../src/shared/sab-ring/hash.js";
import { ringSlots } from "../../src/shared/sab-ring/layout.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, frameAnswer as answer, minionEventFrame, minionThrough, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.74";
const HOSTS = ["127.0.0.75", "127.0.0.76", "127.0.0.77"];
const TRIALS = 20;
const ACCEPTED = "accepted";
const REFUSED = '"bad load"';

let frames = 0;
/** A fresh request frame as the minion sends it (and as someone on the path captures it): an event of its own tag. */
function frame(m: TestMinion, protocol: "v3" | "v2"): { bytes: Buffer; nonce: string; tag: string } {
  const nonce = newNonce();
  const tag = `ro/replay/${protocol}/${++frames}`;
  return { bytes: minionEventFrame(m, protocol, nonce, tag), nonce, tag };
}

/** The same frame to two masters at the same instant: both answers. */
async function race(f: Buffer, a: string, b: string): Promise<[string, string]> {
  const [x, y] = await Promise.all([answer(a, f), answer(b, f)]);
  return [x, y];
}

/** How often each tag fired, as master `i`'s bus sees it (each master's events reach every bus it can reach once). */
async function busCounts(h: ClusterHarness, i: number): Promise<{ counts: Map<string, number>; close: () => void }> {
  const ec = new EventClient(loadMasterConfig(h.masters[i]!.confDir).sock_dir);
  await ec.connect();
  const counts = new Map<string, number>();
  ec.on((e) => counts.set(e.tag, (counts.get(e.tag) ?? 0) + 1));
  return { counts, close: () => ec.close() };
}

/** Tags acted on more than once, as the masters' logs must account for (the header). */
const doubles: string[] = [];

/** Every tag in `tags` fired (waiting a moment for the forwarded ones); those fired more than once go to `doubles`. */
async function firedOnce(counts: Map<string, number>, tags: string[]): Promise<void> {
  await until("every frame's event on the bus", async () => (tags.every((t) => counts.has(t)) ? true : undefined), 10_000, 100);
  await sleep(500); // a second firing would be forwarded within this
  assert.deepEqual(tags.filter((t) => !counts.has(t)), [], "each frame acted on");
  doubles.push(...tags.filter((t) => counts.get(t)! > 1).map((t) => `${t}: ${counts.get(t)}`));
}

/**
 * The frames a master accepted without its decider's verdict, from the line it logs when it stops (nonce-owner.ts):
 * undecided, and let through by a stand-in while the owner was passed over by this master alone.
 */
function undecidedAtStop(logText: string): number | undefined {
  const m = /nonce owner check: .*?, (\d+) undecided \(accepted without a word\), (\d+) on a stand-in's word/.exec(logText);
  return m ? Number(m[1]) + Number(m[2]) : undefined;
}

test("a captured frame sent to two cluster masters at once is acted on by exactly one, and both answer it", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
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

    await t.test("every pair of masters, 20 frames per protocol: both answered, one acts; a third answers the same bytes and refuses the nonce sealed again", async () => {
      const bus = await busCounts(h, 0);
      const tags: string[] = [];
      try {
        for (const p of ["v3", "v2"] as const) {
          for (let i = 0; i < TRIALS; i++) {
            const [a, b] = pairs[i % pairs.length]!;
            const third = 3 - a - b;
            const f = frame(byProtocol[p], p);
            tags.push(f.tag);
            const got = await race(f.bytes, HOSTS[a]!, HOSTS[b]!);
            assert.deepEqual(got, [ACCEPTED, ACCEPTED], `${p} frame ${i} to m${a + 1} and m${b + 1} at once: ${got.join(", ")}`);
            assert.equal(await answer(HOSTS[third]!, f.bytes), ACCEPTED, `${p} frame ${i} sent again to m${third + 1} afterwards`);
            const resealed = minionEventFrame(byProtocol[p], p, f.nonce, f.tag);
            assert.equal(await answer(HOSTS[third]!, resealed), REFUSED, `${p} frame ${i}'s nonce sealed again, to m${third + 1}`);
          }
        }
        await firedOnce(bus.counts, tags);
      } finally {
        bus.close();
      }
      // a non-owner that lost a race was told by the owner (two non-owners race in one pair of every three)
      const told = h.masters.some((m) => /reused nonce [0-9a-f]{32} \(seen by the master that decides for ro-v/.test(readFileSync(m.logFile, "utf8")));
      assert.ok(told, "some master took a frame for a copy on its decider's word");
      const late = h.masters.filter((m) => /did not decide|undecided/.test(readFileSync(m.logFile, "utf8"))).map((m) => m.id);
      if (late.length) t.diagnostic(`a verdict came too late on ${late.join(", ")} (load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}): the frame was accepted undecided, counted`);
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
          assert.equal(await answer(host, f.bytes), ACCEPTED);
          ms.push(performance.now() - t0);
        }
        ms.sort((x, y) => x - y);
        medians.push(`m${i + 1}${h.masters[i]!.id === owner ? " (owner)" : ""} ${ms[7]!.toFixed(1)} ms`);
      }
      t.diagnostic(`one v3 request, connect to reply, load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")}: ${medians.join(", ")}`);
    });

    await t.test("the owner cut off: the next master in the minion's ring order decides, still each frame acted on once", async () => {
      const cut = h.masters.findIndex((m) => m.id === owner);
      const [a, b] = [0, 1, 2].filter((i) => i !== cut) as [number, number];
      h.partition(cut);
      await sleep(1_000); // the chaos file is polled every 200 ms
      const bus = await busCounts(h, a); // (the owner's bus is cut off from the others' events)
      const tags: string[] = [];
      try {
        for (let i = 0; i < 10; i++) {
          const f = frame(byProtocol.v3, "v3");
          tags.push(f.tag);
          const got = await race(f.bytes, HOSTS[a]!, HOSTS[b]!);
          assert.deepEqual(got, [ACCEPTED, ACCEPTED], `frame ${i} to m${a + 1} and m${b + 1} with ${owner} cut off: ${got.join(", ")}`);
        }
        await firedOnce(bus.counts, tags);
      } finally {
        h.heal();
        bus.close();
      }
      await until("the cluster to heal", async () => ((await h.waitLeader([0, 1, 2], 3).catch(() => undefined)) ? true : undefined), 60_000, 1_000);
    });
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(true);
  }
  const undecided = h.masters.map((m) => undecidedAtStop(readFileSync(m.logFile, "utf8")));
  if (process.env.BRINE_KEEP_CLUSTER !== "1") rmSync(h.root, { recursive: true, force: true });
  t.diagnostic(`frames acted on twice: ${doubles.length}; accepted undecided, per master: ${undecided.join(", ")}`);
  // every master had frames to check, so each says at its stop how many it accepted undecided
  assert.ok(undecided.every((n) => n !== undefined), `every master logged its nonce owner check at stop: ${undecided.join(", ")}`);
  const sum = undecided.reduce((a: number, b) => a + b!, 0);
  assert.ok(doubles.length <= sum, `frames acted on more than once with no master accepting one undecided: ${doubles.join(", ")} (undecided per master: ${undecided.join(", ")})`);
});
