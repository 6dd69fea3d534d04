/**
 * Mine data and the minion data cache (grains and pillar) placed on a ring's owners, on three real master
 * processes (127.0.0.141-143 behind HAProxy on 127.0.0.140): ring `minions` on m1, m2, m3 with
 * `members: voters` and `replicas: 2`, `mine` and `grains` routed to it, six in-repo minions attached two to
 * each master, each sending its grains (`_pillar`) and mine data (`_mine`) to the master it is attached to.
 * - placement_check (data_type mine, then grains) finds each minion's record on exactly its 2 owners, with
 *   every outbox empty: the master a minion wrote on dropped its copy when it is not an owner.
 * - From every master: `_mine_get` from a minion attached there (a glob, and a grain target) returns all six
 *   minions' mine data; a publish with a grain target (`-G`) expects exactly the minions whose grain matches
 *   (without the other masters' data a master would count every minion it holds no data for: greedy); the
 *   cache.grains / cache.mine runners list all six.
 * - `cache.clear_mine` on one master clears a minion's mine everywhere (a tombstone handed to its owners).
 * - An eauth user whose ACL is `G@placed_role:web` may publish to the web minions through every master (the ACL
 *   is judged over the targeted minions' data wherever it lives), and not to every minion.
 * - One owner killed (not the cluster's leader): the two masters left still answer all of the above.
 * The publish latency with a grain target (the other masters asked once per publish) against a glob target is
 * printed as a diagnostic.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { syntheticGrains } from "../../src/lib/minion/grains.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, skipReason, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.140";
const HOSTS = ["127.0.0.141", "127.0.0.142", "127.0.0.143"];
const IDS = ["pm-a", "pm-b", "pm-c", "pm-d", "pm-e", "pm-f"];
const WEB = IDS.filter((_, i) => i % 2 === 1);
const NODES = ["m1", "m2", "m3"];

test("mine and grains routed to a ring with replicas 2 live on each minion's two owners, and mine.get, -G targeting and cache.* answer from every master, one owner down too", { timeout: 600_000 }, async (t) => {
  const why = await skipReason(LB, HOSTS);
  if (why) {
    t.skip(why);
    return;
  }
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-minion-placement", privateCachedir: true, extra: { runner_returns: false, external_auth: { auto: { webop: [{ "G@placed_role:web": ["test.ping"] }] } } } });
  const minions: TestMinion[] = [];
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const runner = (i: number, fun: string, arg: unknown[]) => h.controlRunner(i, fun, arg);
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const clients = cfgs.map((c) => new LocalClient(c));
  try {
    const leader = await h.waitLeader([0, 1, 2], 3, 60_000);
    const li = h.masters.findIndex((m) => m.id === leader);
    await run(li, "ring_create", "minions", NODES.join(","));
    for (const i of [0, 1, 2]) await until(`m${i + 1} to host ring minions`, async () => ((await run(i, "ring_info", "minions")).epoch >= 0 ? true : undefined), 30_000);
    await run(li, "ring_set", "minions", "members=voters", "replicas=2");
    await until("ring minions to shard over three voters with replicas 2", async () => {
      const infos = await Promise.all([0, 1, 2].map((i) => run(i, "ring_info", "minions")));
      return infos.every((r) => r.node_count === 3 && r.replicas === 2 && r.members === "voters") ? true : undefined;
    }, 60_000);
    for (const dt of ["mine", "grains"]) {
      const r = await run(li, "route_set", dt, "minions");
      assert.equal(r.warning, undefined, `${dt} is placed: nothing to warn of`);
    }
    for (const i of [0, 1, 2]) await until(`m${i + 1} to see both routes`, async () => {
      const r = (await run(i, "routes")).routes;
      return r.mine === "minions" && r.grains === "minions" ? true : undefined;
    }, 15_000);

    // two minions on each master, not through the balancer: each writes its grains and mine on that master
    const keys = await testKeys(IDS.length);
    IDS.forEach((id, i) => minions.push(minionThrough(HOSTS[i % 3]!, id, keys[i]!, undefined, { grains: { ...syntheticGrains(id, { index: i }), placed_role: WEB.includes(id) ? "web" : "db" } })));
    await Promise.all(minions.map((m) => m.start()));
    for (const m of minions) {
      const ok = await m.channel.send({ cmd: "_mine", id: m.id, data: { "test.ping": true, "network.ip_addrs": [`10.0.0.${IDS.indexOf(m.id) + 1}`] } }, m.requestOptions);
      assert.equal(ok, true, `${m.id}'s _mine`);
    }

    /** placement_check of a minion data type until each id is on its two owners and no outbox holds any */
    const placed = (i: number, dataType: string) =>
      until(`every minion's ${dataType} record on its two owners`, async () => {
        const r = await run(i, "placement_check", "minions", `data_type=${dataType}`);
        const pending = Object.values(r.handoff_pending as Record<string, number>).reduce((a, b) => a + b, 0);
        t.diagnostic(`m${i + 1} placement_check ${dataType}: ok ${r.ok}, violations ${r.violations.length}, pending ${JSON.stringify(r.handoff_pending)}`);
        return r.ok && pending === 0 && IDS.every((id) => r.ids[id]) ? r : undefined;
      }, 120_000, 2000);
    for (const dt of ["mine", "grains"]) {
      const r = await placed(li, dt);
      assert.equal(r.data_type, dt);
      for (const id of IDS) assert.equal(r.ids[id].length, 2, `${dt} of ${id}: ${r.ids[id]}`);
      // the master each minion wrote on is not always an owner: its copy went once the owners had it
      const writtenOn = IDS.map((id, i) => [id, NODES[i % 3]!] as const);
      const dropped = writtenOn.filter(([id, node]) => !r.ids[id].includes(node));
      t.diagnostic(`${dt}: ${dropped.length} of ${IDS.length} minions wrote on a master that is not an owner, which no longer holds them`);
    }

    /** every read from master i (and the minion attached to it) sees all six minions' data */
    const readsAnswer = async (i: number, note: string) => {
      const asker = minions[i]!;
      const all = (await asker.channel.send({ cmd: "_mine_get", id: asker.id, tgt: "pm-*", fun: "network.ip_addrs", tgt_type: "glob" }, asker.requestOptions)) as Record<string, unknown>;
      assert.deepEqual(Object.keys(all).sort(), IDS, `${note}: _mine_get through m${i + 1}`);
      assert.deepEqual(all["pm-c"], ["10.0.0.3"]);
      const web = (await asker.channel.send({ cmd: "_mine_get", id: asker.id, tgt: "placed_role:web", fun: "test.ping", tgt_type: "grain" }, asker.requestOptions)) as Record<string, unknown>;
      assert.deepEqual(Object.keys(web).sort(), WEB, `${note}: _mine_get with a grain target through m${i + 1}`);
      const pub = await clients[i]!.pub({ tgt: "placed_role:web", tgtType: "grain", fun: "test.ping", timeoutS: 10 });
      assert.deepEqual([...(pub.minions ?? [])].sort(), WEB, `${note}: -G expects exactly the web minions on m${i + 1}`);
      // an eauth user whose ACL names a grain target: judged over the targeted minions' data wherever it is
      const webop = { eauth: "auto", username: "webop", password: "any" };
      const allowed = await clients[i]!.pub({ tgt: "placed_role:web", tgtType: "grain", fun: "test.ping", timeoutS: 10, kwargs: webop });
      assert.deepEqual([...(allowed.minions ?? [])].sort(), WEB, `${note}: webop may ping the web minions through m${i + 1}: ${JSON.stringify(allowed)}`);
      const refused = await clients[i]!.pub({ tgt: "pm-*", tgtType: "glob", fun: "test.ping", timeoutS: 10, kwargs: webop });
      assert.ok(!refused.jid && refused.error, `${note}: webop may not ping every minion through m${i + 1}: ${JSON.stringify(refused)}`);
      const grains = (await runner(i, "cache.grains", ["pm-*"])) as Record<string, Record<string, unknown>>;
      assert.deepEqual(Object.keys(grains).sort(), IDS, `${note}: cache.grains on m${i + 1}`);
      for (const id of IDS) assert.equal(grains[id]!.placed_role, WEB.includes(id) ? "web" : "db", `${note}: ${id}'s grains on m${i + 1}`);
      const mine = (await runner(i, "cache.mine", ["pm-*"])) as Record<string, Record<string, unknown>>;
      assert.deepEqual(Object.keys(mine).filter((id) => Object.keys(mine[id]!).length > 0).sort(), IDS, `${note}: cache.mine on m${i + 1}`);
      const webByRunner = (await runner(i, "cache.grains", ["placed_role:web", "grain"])) as Record<string, unknown>;
      assert.deepEqual(Object.keys(webByRunner).sort(), WEB, `${note}: cache.grains with a grain target on m${i + 1}`);
    };
    for (const i of [0, 1, 2]) await readsAnswer(i, "all masters up");

    // publish latency: a grain target asks the other masters once; a glob target asks nobody (alternated, so
    // both see the same load and the same kept presence addresses)
    const pubMs = { grain: [] as number[], glob: [] as number[] };
    const mineMs = { grain: [] as number[], glob: [] as number[] };
    for (let n = 0; n < 12; n++) {
      for (const [kind, tgt] of [["grain", "placed_role:web"], ["glob", "pm-*"]] as const) {
        let t0 = performance.now();
        assert.ok((await clients[0]!.pub({ tgt, tgtType: kind, fun: "test.ping", timeoutS: 10 })).jid);
        pubMs[kind].push(performance.now() - t0);
        t0 = performance.now();
        await minions[0]!.channel.send({ cmd: "_mine_get", id: "pm-a", tgt, fun: "test.ping", tgt_type: kind }, minions[0]!.requestOptions);
        mineMs[kind].push(performance.now() - t0);
      }
    }
    const median = (l: number[]) => [...l].sort((a, b) => a - b)[l.length >> 1]!.toFixed(1);
    const { readFileSync } = await import("node:fs");
    t.diagnostic(`on m1, median of 12: publish with a grain target ${median(pubMs.grain)} ms, glob ${median(pubMs.glob)} ms; _mine_get grain ${median(mineMs.grain)} ms, glob ${median(mineMs.glob)} ms (load ${readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ")})`);

    // a clear on one master reaches the owners: a tombstone, newer than the record they hold
    assert.equal(await runner((li + 1) % 3, "cache.clear_mine", ["pm-a"]), true);
    await until("pm-a's mine cleared as every master reads it", async () => {
      const seen = await Promise.all([0, 1, 2].map((i) => runner(i, "cache.mine", ["pm-a"])));
      return seen.every((m) => Object.keys(m["pm-a"] ?? {}).length === 0) ? true : undefined;
    }, 30_000, 1000);
    await minions[0]!.channel.send({ cmd: "_mine", id: "pm-a", data: { "test.ping": true, "network.ip_addrs": ["10.0.0.1"] } }, minions[0]!.requestOptions);
    await placed(li, "mine");

    // --- one owner down: kill a master that is not the cluster's leader; every minion still has an owner up
    const victim = [0, 1, 2].find((i) => i !== li)!;
    h.kill(victim, "SIGKILL");
    await h.waitExit(victim);
    for (const i of [0, 1, 2].filter((x) => x !== victim)) await readsAnswer(i, `m${victim + 1} down`);
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
