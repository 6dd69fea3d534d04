/**
 * Real salt-minions (3007 and 3006.8) through an isolated-filesystem brine cluster: three salt-master processes, each with
 * its own directories (the first founds, the other two join with the secret and the fingerprint `salt-key -F`
 * prints), behind a real HAProxy; the minions know only the balancer. Each key, pending on whichever master took
 * the sign-in, is accepted there by the operator (auto_accept is off) and reaches the other masters by itself
 * (state-sync's keys channel); then test.ping published on each of the three masters gets both returns.
 * Then with auto_accept: two minions of each generation start at once through the balancer, which sends each of
 * their connections to the next master (roundrobin): a request often reaches a master before the key another
 * master accepted a moment ago (state-sync, 2 s), and waits for it there instead of being refused. Every minion
 * starts, answers test.ping published on each master, and logs no error.
 *
 * Not compared with Python: Salt 3007 has no isolated-filesystem cluster (cluster_isolated_filesystem and
 * cluster_secret are 3008 options; 3007.x's master reads neither), so the harness cannot run a Python one.
 * Skips with a message when Salt's source is absent or HAProxy is not installed.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { ClusterHarness, PUB_PORT, RET_PORT, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const skip = realSaltSkipReason(["3007.x", "v3006.8"]);
const LB = "127.0.0.244";
const HOSTS = ["127.0.0.245", "127.0.0.246", "127.0.0.247"];
/** one minion of each protocol generation: 3007 (v3 requests) and 3006.8 (v2) */
const MINIONS: [string, string][] = [["iso-real-3007", "3007.x"], ["iso-real-3006", "v3006.8"]];

describe("real salt-minions (3007, 3006.8) through an isolated-filesystem brine cluster behind HAProxy", { skip, timeout: 600_000 }, () => {
  let h: ClusterHarness | undefined;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-iso-"));
  after(async () => {
    stopRealMinions(runDir);
    await h?.stop();
  });

  test("sign in through the balancer, each key accepted on one master reaches the others, and both answer test.ping published on every master", async (t) => {
    await clusterPrerequisites(LB, HOSTS);
    h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "iso-interop", isolated: { secret: "interop secret" }, startWith: 1, extra: { auto_accept: false } });
    await h.joinPinned([1, 2]);

    for (const [mid, ref] of MINIONS) {
      const started = startRealMinion(runDir, mid, RET_PORT, PUB_PORT, ref, "", LB);
      const where = await until(`${mid} pending on a master`, async () => {
        for (const i of [0, 1, 2]) if ((await h!.saltKey(i, ["-l", "un"])).stdout.includes(mid)) return i;
        return undefined;
      }, 90_000, 500);
      const accepted = await h.saltKey(where, ["-a", mid, "-y"]);
      assert.equal(accepted.code, 0, accepted.stderr);
      await started;
      await until(`${mid}'s key on every master`, async () => ([0, 1, 2].every((i) => existsSync(path.join(h!.dirOf(i), "cluster-pki", "minions", mid))) ? true : undefined), 60_000, 500);
    }

    for (const i of [0, 1, 2]) {
      const r = await h.salt(i, ["iso-real-*", "test.ping", "--out", "json", "-t", "30"]);
      const rets = parseReturns(r.stdout);
      for (const [mid] of MINIONS) assert.equal(rets[mid], true, `${mid}: test.ping published on m${i + 1}: ${r.stdout}${r.stderr}`);
    }
  });

  test("with auto_accept, minions that start at once through the balancer in rotation all start and answer on every master, with no error logged", async () => {
    await h?.stop();
    h = undefined;
    await clusterPrerequisites(LB, HOSTS);
    h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "iso-interop-auto", isolated: { secret: "interop secret" }, startWith: 1, extra: { auto_accept: true } });
    await h.joinPinned([1, 2]);
    const fleet: [string, string][] = [["iso-auto-3007-a", "3007.x"], ["iso-auto-3006-a", "v3006.8"], ["iso-auto-3007-b", "3007.x"], ["iso-auto-3006-b", "v3006.8"]];
    const started = await Promise.allSettled(fleet.map(([mid, ref]) => startRealMinion(runDir, mid, RET_PORT, PUB_PORT, ref, "", LB)));
    started.forEach((r, i) => assert.equal(r.status, "fulfilled", `${fleet[i]![0]} started: ${r.status === "rejected" ? (r.reason as Error).message : ""}`));
    await until("every key on every master", async () => ([0, 1, 2].every((i) => fleet.every(([mid]) => existsSync(path.join(h!.dirOf(i), "cluster-pki", "minions", mid)))) ? true : undefined), 60_000, 500);
    for (const i of [0, 1, 2]) {
      const r = await h.salt(i, ["iso-auto-*", "test.ping", "--out", "json", "-t", "30"]);
      const rets = parseReturns(r.stdout);
      for (const [mid] of fleet) assert.equal(rets[mid], true, `${mid}: test.ping published on m${i + 1}: ${r.stdout}${r.stderr}`);
    }
    for (const [mid] of fleet) {
      const errors = readFileSync(path.join(runDir, "minions", mid, "log", "minion"), "utf8").split("\n").filter((l) => /\[(ERROR|CRITICAL)\s*\]/.test(l));
      assert.deepEqual(errors, [], `${mid}'s log`);
    }
  });
});
