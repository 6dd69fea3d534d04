/**
 * `_pillar` stores grains + the compiled pillar in the minion data cache, so pillar targeting (`-I`)
 * on the master finds the right minions; a new `_pillar` (what `saltutil.refresh_pillar` sends)
 * re-compiles from the edited tree and updates the cache.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import type { TestMaster } from "../helpers/master.js";
import { copyTree, fixture, minion, pillarOf, startFsMaster, tempRoot, writeTree } from "../fileserver/helpers.js";

describe("minion data cache keeps the compiled pillar", () => {
  let tm: TestMaster;
  let pc: PublishClient;
  let pillarDir: string;
  const ms: TestMinion[] = [];

  before(async () => {
    const dir = tempRoot("brine-pcache-");
    pillarDir = path.join(dir, "srv", "pillar");
    copyTree(fixture("pillar-tree", "base"), pillarDir);
    tm = await startFsMaster({}, dir);
    ms.push(await minion(tm, "web01", 3, { role: "web" }), await minion(tm, "db01", 4, { role: "db" }));
    pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
  });
  after(async () => {
    pc?.close();
    await Promise.all(ms.map((m) => m.stop()));
    await tm?.stop();
  });

  const targeted = async (tgt: string) => (await pc.publish({ tgt, fun: "test.ping", tgt_type: "pillar" })).minions.sort();

  test("a pillar target selects the minions whose compiled pillar matches", async () => {
    assert.deepEqual(await targeted("web:server:nginx"), ["web01"]);
    assert.deepEqual(await targeted("db:engine:postgres"), ["db01"]);
    assert.deepEqual(await targeted("users:alice:admin:True"), ["db01", "web01"]);
  });

  test("a refreshed pillar (new _pillar after the tree changed) updates the cache", async () => {
    writeTree(pillarDir, { "db.sls": "#!yaml\ndb:\n  engine: mysql\n" });
    await assert.rejects(targeted("db:engine:mysql"), /could not resolve minions/, "no minion matches before the refresh");
    const p = (await pillarOf(ms[1]!)) as Record<string, unknown>;
    assert.deepEqual(p.db, { engine: "mysql" });
    assert.deepEqual(await targeted("db:engine:mysql"), ["db01"]);
  });
});
