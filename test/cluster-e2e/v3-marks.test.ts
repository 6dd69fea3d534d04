/**
 * Protocol v3 marks without a shared `cachedir` (issue #13): three masters behind HAProxy, each with its own
 * cachedir. A v2 (3006-style) request naming a minion that signed in with v3 is refused by every master, not
 * only by the one it signed in to:
 *
 * 1. a v3 minion signs in at master 1; a v2 frame forged in its name (sealed with the cluster's AES key, which
 *    every accepted minion holds) is refused by masters 2 and 3 (the mark reached them with the sign-in's
 *    cache-sync records), while a real v2 minion's own frames are still served everywhere;
 * 2. master 3, stopped with SIGSTOP while another v3 minion signs in at master 1 (its peers count its sessions
 *    down, so nothing is sent to it), refuses the forgery after SIGCONT: its bulk pull carried the mark.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { packSalt, sealSalt } from "../../src/lib/minion/wire.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, frameAnswer as answer, RET_PORT, minionThrough, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.120";
const HOSTS = ["127.0.0.121", "127.0.0.122", "127.0.0.123"];
/** longer than the peers' heartbeat timeout (DEFAULT_PEER_LIMITS.heartbeatTimeoutMs, 5 s) */
const PAUSE_MS = 8_000;

/** A v2 request naming `id`, sealed with the cluster's AES key as any accepted 3006 minion can seal it. */
function v2Frame(aes: string, id: string): Buffer {
  return packSalt({ enc: "aes", load: sealSalt(new Crypticle(aes), { cmd: "_minion_event", id, tag: "v3m/forged", data: {}, nonce: newNonce() }), version: 2 });
}


test("a v2 request forged in a v3 minion's name is refused by every master of an isolated cluster, and by one that was away", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-v3-marks", privateCachedir: true });
  const minions: TestMinion[] = [];
  const marked = (i: number, id: string) => {
    try {
      readFileSync(path.join(h.root, h.masters[i]!.id, "cache", "minion-v3", id));
      return true;
    } catch {
      return false;
    }
  };
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(3);
    // the v3 victim and a 3006-style minion (the forger: it holds the AES key every minion shares), at master 1
    const victim = minionThrough(HOSTS[0]!, "v3m-victim", keys[0]!);
    const old = minionThrough(HOSTS[0]!, "v3m-old", keys[1]!, RET_PORT, { protocol: "v2" });
    minions.push(victim, old);
    await Promise.all(minions.map((m) => m.start()));
    assert.equal(victim.protocol, "v3");
    const aes = old.creds!.aes;

    await t.test("a mark made on master 1 reaches masters 2 and 3: the forgery is refused everywhere, real v2 traffic is served", async () => {
      assert.equal(marked(0, victim.id), true, "master 1 marked the v3 sign-in");
      for (const i of [1, 2]) await until(`m${i + 1} to hold ${victim.id}'s mark`, async () => (marked(i, victim.id) ? true : undefined), 10_000, 100);
      await sleep(1_100); // past the request threads' memory of "unmarked" (v3UnmarkedTtlMs)
      for (const host of HOSTS) {
        assert.equal(await answer(host, v2Frame(aes, victim.id)), '"bad load"', `a v2 frame in ${victim.id}'s name on ${host}`);
        assert.equal(await answer(host, v2Frame(aes, old.id)), "accepted", `the v2 minion's own frame on ${host}`);
      }
      assert.match(readFileSync(h.masters[2]!.logFile, "utf8"), /signs in with protocol v3/);
    });

    await t.test("a master paused while a v3 minion signed in learns the mark from its bulk pull", async () => {
      const away = 2;
      h.kill(away, "SIGSTOP");
      const pausedAt = Date.now();
      await until(`m1 to see ${h.masters[away]!.id} down`, async () => {
        const mem = await h.clusterRunner(0, "members");
        return mem.unhealthy_voters.includes(h.masters[away]!.id) ? true : undefined;
      }, PAUSE_MS + 10_000);
      const late = minionThrough(HOSTS[0]!, "v3m-late", keys[2]!);
      minions.push(late);
      await late.start();
      await until("m2 to hold the new mark", async () => (marked(1, late.id) ? true : undefined), 10_000, 100);
      await sleep(Math.max(0, PAUSE_MS - (Date.now() - pausedAt)));
      h.kill(away, "SIGCONT");
      await until(`m${away + 1} to pull ${late.id}'s mark`, async () => (marked(away, late.id) ? true : undefined), 15_000, 100);
      await sleep(1_100);
      assert.equal(await answer(HOSTS[away]!, v2Frame(aes, late.id)), '"bad load"', "a v2 frame in the new v3 minion's name, on the master that was away");
      assert.equal(await answer(HOSTS[away]!, v2Frame(aes, old.id)), "accepted");
      await h.waitLeader([0, 1, 2], 3);
    });
  } finally {
    for (const i of [0, 1, 2]) h.kill(i, "SIGCONT");
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
