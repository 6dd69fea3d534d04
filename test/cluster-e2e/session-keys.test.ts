/**
 * Protocol v3 session keys without a shared `cachedir` (issue #6): three masters behind HAProxy, each with its
 * own cachedir. A minion moved by the balancer to another master keeps working without signing in again:
 *
 * - when its key was created on one master (the key reaches the peers with the auth reply);
 * - when two masters created keys for it at the same moment (here: while cut off from each other): both keys
 *   stay valid everywhere, every master names the same one current (new sign-ins converge on it), and the key
 *   the minion holds, the older one, is accepted by the master it moves to.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.40";
const HOSTS = ["127.0.0.41", "127.0.0.42", "127.0.0.43"];

test("v3 session keys are shared through the cluster (no shared cachedir)", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-session-keys", privateCachedir: true });
  const minions: TestMinion[] = [];
  const sessionFile = (i: number, id: string) => path.join(h.root, h.masters[i]!.id, "cache", "sessions", id);
  const keyLines = (i: number, id: string) => readFileSync(sessionFile(i, id), "latin1").trim().split("\n").map((l) => l.split(" ")[0]!);
  /** moves minion `m` (and whatever else the balancer sent there) from master `from` to master `to` */
  const move = async (m: TestMinion, from: number, to: number) => {
    let resubscribed = false;
    m.once("pubConnected", () => (resubscribed = true));
    await h.only(to);
    await h.drain(from);
    await until(`${m.id} to subscribe again`, async () => (resubscribed ? true : undefined), 20_000, 50);
    await until(`the balancer to hold no connection to m${from + 1}`, async () => {
      const s = await h.haproxyServers();
      return s.filter((x) => x.server === h.masters[from]!.id).every((x) => x.scur === 0) ? true : undefined;
    }, 20_000);
  };
  const pingOn = async (i: number, m: TestMinion) => {
    const r = await h.salt(i, ["-L", m.id, "test.ping", "--out", "json", "-t", "15"]);
    return parseReturns(r.stdout)[m.id];
  };
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(2);

    await t.test("a v3 minion moved from master 1 to master 2 returns without signing in again", async () => {
      await h.only(0);
      const m = minionThrough(LB, "sk-mover", keys[0]!);
      minions.push(m);
      await m.start();
      assert.equal(m.protocol, "v3");
      assert.deepEqual(keyLines(0, m.id), [m.creds!.session], "master 1 created the key it handed out");
      const reauths = m.stats.reauths;
      const badLoads = m.stats.badLoads;
      await move(m, 0, 1);
      assert.equal(await pingOn(1, m), true, "master 2 accepted the return encrypted with master 1's key");
      assert.equal(m.stats.reauths, reauths, "no sign-in again");
      assert.equal(m.stats.badLoads, badLoads, "no request refused");
      await h.undrain(0);
    });

    await t.test("keys two masters created for one minion at once converge, and the minion's key works on both", async () => {
      await h.only(0);
      h.partition(0);
      const cut = (i: number) => readFileSync(h.masters[i]!.logFile, "utf8").includes("fault injection: cut off from");
      await until("masters 1 and 2 to apply the partition", async () => (cut(0) && cut(1) ? true : undefined), 20_000);
      const m = minionThrough(LB, "sk-race", keys[1]!);
      minions.push(m);
      await m.start();
      // the same minion signs in at master 2 directly while master 1 is cut off: master 2 creates its own key
      const twin = minionThrough(HOSTS[1]!, "sk-race", keys[1]!);
      await twin.start();
      const older = m.creds!.session!;
      const newer = twin.creds!.session!;
      await twin.stop();
      assert.notEqual(older, newer, "two keys for one minion");
      h.heal();
      const converged = await until("master 1 and master 2 to hold both keys and name the same one current", async () => {
        const a = keyLines(0, m.id);
        const b = keyLines(1, m.id);
        return a[0] === b[0] && [older, newer].every((k) => a.includes(k) && b.includes(k)) ? a[0] : undefined;
      }, 30_000);
      assert.equal(converged, newer, "the newest key is current everywhere");
      const reauths = m.stats.reauths;
      const badLoads = m.stats.badLoads;
      const why: string[] = [];
      m.on("reauth", (r) => why.push(`reauth: ${r.reason}`));
      m.on("badLoad", (r) => why.push(`bad load: ${String(r.cmd)}`));
      // the minion holds the older key: master 2 (which made the newer one) accepts it
      await move(m, 0, 1);
      assert.equal(await pingOn(0, m), true, "the return through master 2 is accepted with the key master 1 handed out");
      assert.equal(m.stats.reauths, reauths, `no sign-in again: ${why.join("; ")}`);
      assert.equal(m.stats.badLoads, badLoads, "no request refused");
      // a new sign-in anywhere hands out the converged key
      const probe = minionThrough(HOSTS[0]!, "sk-race", keys[1]!);
      await probe.start();
      const got = probe.creds!.session;
      assert.equal(got, newer, `a sign-in on master 1 after the convergence handed out ${got === older ? "the older key" : "a third key"}`);
      await probe.stop();
      await h.undrain(0);
      await h.undrain(2);
    });
  } finally {
    h.heal();
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
