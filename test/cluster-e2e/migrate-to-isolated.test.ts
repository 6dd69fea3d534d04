/**
 * Seed 001's migration, end to end, on three real master processes behind HAProxy with minions that know only
 * the balancer: a shared-filesystem cluster (one `cluster_pki_dir` and one set of roots for all, each master its
 * own cachedir) with its keys in Salt's localfs layout -> `salt-run pki.migrate_to_mmap` and
 * `keys.cache_driver: mmap_key`, one master at a time -> the isolated-filesystem topology, one master at a time
 * (drain it, stop it, copy the shared cluster_pki_dir and roots into its own directories, start it isolated with
 * the secret, put it back) -> the shared directory removed. After every step test.ping published on a running
 * master reaches every minion, and no minion signs in again. At the end a key accepted on one master reaches
 * the others by state-sync, which a shared directory no longer does for them.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, rmSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.248";
const HOSTS = ["127.0.0.249", "127.0.0.250", "127.0.0.251"];
const MINIONS = 6;

test("a shared-filesystem cluster migrates to the mmap key store and then to isolated filesystems one master at a time, every minion answering throughout", { timeout: 600_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "seed-001", privateCachedir: true });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(MINIONS + 1);
    for (let i = 0; i < MINIONS; i++) minions.push(minionThrough(LB, `mig-${i}`, keys[i]!));
    await Promise.all(minions.map((m) => m.start()));
    const ids = minions.map((m) => m.id).sort();
    const reauths = () => minions.reduce((n, m) => n + m.stats.reauths, 0);
    // why each sign-in again happened, for the assertion's message
    const reauthReasons: string[] = [];
    for (const m of minions) m.on("reauth", (e: { reason: string }) => reauthReasons.push(`${m.id}: ${e.reason}`));

    /** test.ping published on master `on` (running) reaches every minion, and nobody signed in again */
    const everyoneAnswers = async (on: number, step: string) => {
      const r = await h.salt(on, ["mig-*", "test.ping", "--out", "json", "-t", "20"]);
      const rets = parseReturns(r.stdout);
      assert.deepEqual(Object.keys(rets).sort(), ids, `${step}: every minion answers m${on + 1}: ${r.stdout}${r.stderr}`);
      for (const id of ids) assert.equal(rets[id], true, `${step}: ${id}`);
      assert.equal(reauths(), 0, `${step}: no minion signed in again (${reauthReasons.join("; ")})`);
    };
    await everyoneAnswers(0, "shared filesystem, localfs keys");

    /** drain master i, stop it, change its options, start it, wait for three voters, put it back */
    const restartWith = async (i: number, over: Record<string, unknown>, before?: () => void) => {
      await h.drain(i);
      h.kill(i, "SIGTERM");
      await h.waitExit(i);
      before?.();
      h.configure(i, over);
      await h.startMaster(i);
      await h.waitLeader([0, 1, 2], 3, 60_000);
      await h.undrain(i);
      await h.waitUp([i]);
    };

    // step 1: the keys into the indexed store (in the shared cluster_pki_dir), then every master on it
    const migrated = await h.saltRun(0, ["pki.migrate_to_mmap"]);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, new RegExp(`${MINIONS}\\b`), `the report counts the accepted keys: ${migrated.stdout}`);
    for (const i of [0, 1, 2]) {
      await restartWith(i, { "keys.cache_driver": "mmap_key" });
      await everyoneAnswers((i + 1) % 3, `m${i + 1} on mmap_key`);
    }

    // step 2: one master at a time onto its own directories
    const shared = path.join(h.shared, "pki");
    for (const i of [0, 1, 2]) {
      const own = h.dirOf(i);
      await restartWith(
        i,
        {
          cluster_isolated_filesystem: true,
          cluster_secret: "seed 001",
          cluster_pki_dir: path.join(own, "cluster-pki"),
          file_roots: { base: [path.join(own, "srv", "salt")] },
          pillar_roots: { base: [path.join(own, "srv", "pillar")] },
        },
        () => {
          cpSync(shared, path.join(own, "cluster-pki"), { recursive: true });
          cpSync(path.join(h.shared, "srv"), path.join(own, "srv"), { recursive: true });
        },
      );
      await everyoneAnswers((i + 1) % 3, `m${i + 1} isolated`);
    }

    // step 3: the shared directory goes; the cluster carries on, and keys travel by state-sync
    rmSync(h.shared, { recursive: true, force: true });
    await everyoneAnswers(2, "shared directory removed");
    await h.only(0);
    const late = minionThrough(LB, "mig-late", keys[MINIONS]!);
    minions.push(late);
    await late.start();
    await until("mig-late accepted on m2 and m3 by state-sync", async () => {
      const lists = await Promise.all([1, 2].map((i) => h.saltKey(i, ["-l", "acc"])));
      return lists.every((l) => l.stdout.includes("mig-late")) ? true : undefined;
    }, 60_000, 500);
    assert.ok(!existsSync(shared));
  } finally {
    await Promise.all(minions.map((m) => m.stop().catch(() => undefined)));
    await h.stop();
  }
});
