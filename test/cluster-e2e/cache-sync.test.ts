/**
 * The minion data cache and the mine converge on every master (issue #6): three masters behind HAProxy, each
 * with its own `cachedir` (only `cluster_pki_dir` is shared), so nothing reaches another master but what the
 * cluster carries.
 *
 * - a minion signs in while master 3 is the only one the balancer uses: its grains land on master 3 only, yet
 *   a grain-targeted job published on master 1 reaches it;
 * - mine data it sends to master 3 is what `mine.get` answers to a minion attached to master 1;
 * - a master stopped while another minion signs in pulls that minion's data from its peers when it comes back;
 * - `salt-run cache.clear_all` on one master clears the minion's data and mine on the others (tombstones);
 * - the key state-sync sees that the pki dir is shared and copies nothing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { syntheticGrains } from "../../src/lib/minion/grains.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.30";
const HOSTS = ["127.0.0.31", "127.0.0.32", "127.0.0.33"];

function withMarker(m: TestMinion, marker: string): TestMinion {
  Object.assign(m.grains, syntheticGrains(m.id, { extra: { brine_marker: marker } }));
  return m;
}

test("minion data cache and mine are shared through the cluster (no shared cachedir)", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-cache-sync", privateCachedir: true });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(3);

    await t.test("a grain-targeted job on master 1 reaches a minion whose grains landed on master 3", async () => {
      await h.only(2);
      const far = withMarker(minionThrough(LB, "cs-far", keys[0]!), "landed-on-m3");
      minions.push(far);
      await far.start();
      const servers = await h.haproxyServers();
      assert.ok(servers.filter((s) => s.server !== "m3").every((s) => s.scur === 0), `only master 3 holds connections: ${JSON.stringify(servers)}`);
      const r = await h.salt(0, ["-G", "brine_marker:landed-on-m3", "test.ping", "--out", "json", "-t", "15"]);
      assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
      assert.deepEqual(parseReturns(r.stdout), { "cs-far": true });
      // compound targeting reads the same cache
      const c = await h.salt(1, ["-C", "G@brine_marker:landed-on-m3 and cs-*", "test.ping", "--out", "json", "-t", "15"]);
      assert.deepEqual(parseReturns(c.stdout), { "cs-far": true }, c.stderr);
    });

    await t.test("mine data sent to master 3 is what mine.get answers through master 1", async () => {
      const far = minions[0]!;
      const sent = await far.channel.send({ id: far.id, cmd: "_mine", tok: far.keys.tok, data: { "network.ip_addrs": ["10.9.8.7"] } }, far.requestOptions);
      assert.equal(sent, true);
      await h.only(0);
      const near = minionThrough(LB, "cs-near", keys[1]!);
      minions.push(near);
      await near.start();
      const got = await until("master 1 to answer mine.get with master 3's mine data", async () => {
        const r = await near.channel.send({ id: near.id, cmd: "_mine_get", tok: near.keys.tok, tgt: "cs-far", tgt_type: "glob", fun: "network.ip_addrs" }, near.requestOptions);
        return r && typeof r === "object" && Object.keys(r).length > 0 ? r : undefined;
      }, 15_000);
      assert.deepEqual(got, { "cs-far": ["10.9.8.7"] });
    });

    await t.test("a master stopped while a minion signed in pulls that minion's data from its peers when it comes back", async () => {
      h.kill(0, "SIGTERM");
      await h.waitExit(0);
      await h.only(1);
      const late = withMarker(minionThrough(LB, "cs-late", keys[2]!), "while-m1-was-down");
      minions.push(late);
      await late.start();
      await h.startMaster(0);
      await h.undrain(2);
      await h.undrain(0);
      // the job is published on master 1, which never saw cs-late sign in: it matches by the pulled grains
      const r = await until("master 1 to target by the grains it pulled", async () => {
        const x = await h.salt(0, ["-G", "brine_marker:while-m1-was-down", "test.ping", "--out", "json", "-t", "10"]);
        return x.code === 0 ? x : undefined;
      }, 30_000, 1000);
      assert.deepEqual(parseReturns(r.stdout), { "cs-late": true });
    });

    await t.test("salt-run cache.clear_all on master 2 clears the minion's grains, pillar and mine on masters 1 and 3 too", async () => {
      const before = await h.saltRun(0, ["cache.grains", "cs-far", "--out", "json"]);
      assert.equal(JSON.parse(before.stdout)["cs-far"].brine_marker, "landed-on-m3", before.stderr);
      const cleared = await h.saltRun(1, ["cache.clear_all", "cs-far", "--out", "json"]);
      assert.equal(cleared.stdout.trim(), "true", cleared.stderr);
      for (const i of [0, 2]) {
        await until(`master ${i + 1} to drop cs-far's cached data and mine`, async () => {
          const g = await h.controlRunner(i, "cache.grains", ["cs-far"]);
          const m = await h.controlRunner(i, "cache.mine", ["cs-far"]);
          return JSON.stringify(g) === '{"cs-far":{}}' && JSON.stringify(m) === '{"cs-far":{}}' ? true : undefined;
        }, 15_000, 500);
      }
    });

    await t.test("the masters share cluster_pki_dir: the key state-sync notices it (its probes are there) and copies no key", async () => {
      const pki = path.join(h.shared, "pki");
      await until("every master's state-sync probe in the shared pki dir", async () => (h.masters.every((m) => readdirSync(pki).some((f) => f.startsWith(`.brine-statesync-probe-${m.id}.`))) ? true : undefined), 30_000, 500);
      for (const m of h.masters) {
        // a pull cut short by a peer's restart (master 1 was stopped above) logs "installed 0 items ... 1 error(s)":
        // that carried nothing; a pull that installed or deleted a key is the failure
        const carried = readFileSync(m.logFile, "utf8").match(/state-sync (keys|denied_keys) from \S+: installed ([1-9]\d*) items[^\n]*|state-sync (keys|denied_keys) from \S+: installed \d+ items \(\d+ bytes\), deleted [1-9][^\n]*/);
        assert.equal(carried, null, `${m.id} transferred keys: ${carried?.[0]}`);
        const status = path.join(h.root, m.id, "cache", "brine-state-sync", "status.json");
        // no key pull carried or deleted anything (one cut short by the restart could not tell the directory is
        // shared), and at least one pull of this master found it shared
        const keys = existsSync(status) ? (JSON.parse(readFileSync(status, "utf8")).keys ?? {}) : {};
        for (const [peer, e] of Object.entries<any>(keys)) assert.ok(e.items === 0 && (e.items_total ?? 0) === 0 && e.deleted === 0, `${m.id} recorded a keys transfer from ${peer}: ${JSON.stringify(e)}`);
        assert.ok(Object.values<any>(keys).some((e) => e.shared === true), `${m.id} never found the key directory shared: ${JSON.stringify(keys)}`);
      }
    });
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
