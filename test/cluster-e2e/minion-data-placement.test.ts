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
 * - A minion's peer publish (`minion_pub`, `publish.publish`) with a grain target and a `peer:` ACL of
 *   `G@placed_role:web`, through a master that does not hold some web minions' grains, reaches exactly the web
 *   minions (as Salt's auth_check over one shared minion cache), and is refused for every minion.
 * - Back to broadcast: collect_from_peers of a placed bank is refused; after route_clear every master pulls the
 *   records it lacks by itself (placement_check, now expecting every master, is ok), reads answer everywhere, a
 *   collect finds nothing newer, a shed has nothing placed to shed; routed again, each record is back on its owners.
 * - One owner killed (not the cluster's leader): the two masters left still answer all of the above.
 * The publish latency with a grain target (the other masters asked once per publish) against a glob target is
 * printed as a diagnostic.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { syntheticGrains } from "../../src/lib/minion/grains.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, clusterPrerequisites, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.140";
const HOSTS = ["127.0.0.141", "127.0.0.142", "127.0.0.143"];
const IDS = ["pm-a", "pm-b", "pm-c", "pm-d", "pm-e", "pm-f"];
const WEB = IDS.filter((_, i) => i % 2 === 1);
const NODES = ["m1", "m2", "m3"];

test("mine and grains routed to a ring with replicas 2 live on each minion's two owners, and mine.get, -G targeting and cache.* answer from every master, one owner down too", { timeout: 600_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-minion-placement", privateCachedir: true, extra: { runner_returns: false, external_auth: { auto: { webop: [{ "G@placed_role:web": ["test.ping"] }] } }, peer: { "pm-.*": [{ "G@placed_role:web": ["test.ping"] }] } } });
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
        t.diagnostic(`m${i + 1} placement_check ${dataType}: ok ${r.ok}, violations ${r.violations.length}${r.violations.length > 0 ? ` ${JSON.stringify(r.violations.slice(0, 3))}` : ""}, pending ${JSON.stringify(r.handoff_pending)}`);
        return r.ok && pending === 0 && IDS.every((id) => r.ids[id]) ? r : undefined;
      }, 120_000, 2000);
    const placedIds: Record<string, Record<string, string[]>> = {};
    for (const dt of ["mine", "grains"]) {
      const r = await placed(li, dt);
      placedIds[dt] = r.ids;
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

    // a minion's own peer publish (publish.publish, Salt's `peer:` ACL) through a master that does not hold the
    // grains of some web minions (each is on two of the three): the grain target and the ACL's G@ target are
    // judged over every minion's data, as Salt's auth_check does over the cluster's one shared minion cache
    const k = [0, 1, 2].find((i) => WEB.some((id) => !(placedIds.grains[id] ?? []).includes(NODES[i]!)))!;
    const asker = minions[k]!;
    const webHeldElsewhere = WEB.filter((id) => !(placedIds.grains[id] ?? []).includes(NODES[k]!));
    t.diagnostic(`${asker.id} asks through m${k + 1}, which does not hold the grains of ${webHeldElsewhere.join(", ")}`);
    assert.ok(webHeldElsewhere.length > 0);
    const peerJob = (await asker.channel.send({ cmd: "minion_pub", id: asker.id, fun: "test.ping", arg: [], tgt: "placed_role:web", tgt_type: "grain", ret: "", tok: asker.keys.tok }, asker.requestOptions)) as { jid?: string; minions?: string[] };
    assert.deepEqual([...(peerJob.minions ?? [])].sort(), WEB, `minion_pub through m${k + 1} targets exactly the web minions: ${JSON.stringify(peerJob)}`);
    const peerRets = (await asker.peerPublish("placed_role:web", "test.ping", [], { tgtType: "grain", timeoutS: 15 })) as Record<string, unknown>;
    assert.deepEqual(Object.keys(peerRets).sort(), WEB, `publish.publish from ${asker.id} returns the web minions': ${JSON.stringify(peerRets)}`);
    assert.deepEqual(await asker.peerPublish("pm-*", "test.ping", [], { tgtType: "glob", timeoutS: 5 }), {}, "the peer ACL allows the web minions only");

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

    // --- back to broadcast: collecting a placed bank is refused (the records would be held by no rule); after
    // route_clear every master pulls the records it lacks by itself, and placement_check expects every master
    const early = await h.saltRun(li, ["cluster.collect_from_peers", "banks=minions/mine", "--out", "json"]);
    assert.notEqual(early.code, 0, "collect_from_peers of a placed bank is refused");
    assert.match(early.stdout + early.stderr, /mine is routed to ring minions.*cluster\.route_clear mine/s);
    for (const dt of ["mine", "grains"]) await run(li, "route_clear", dt);
    for (const dt of ["mine", "grains"]) {
      const r = await until(`every master holding every minion's ${dt} record (broadcast)`, async () => {
        const c = await run(li, "placement_check", "minions", `data_type=${dt}`);
        t.diagnostic(`m${li + 1} placement_check ${dt} after route_clear: ok ${c.ok}, gathering ${JSON.stringify(c.gathering ?? [])}, violations ${c.violations.length}`);
        return c.ok && c.route === null && IDS.every((id) => c.ids[id]?.length === 3) ? c : undefined;
      }, 120_000, 2000);
      assert.deepEqual([r.gathering, r.violations], [undefined, []], `${dt}: nobody gathering, nothing missing`);
    }
    for (const i of [0, 1, 2]) await readsAnswer(i, "back to broadcast");
    // every master holds every record: a collect finds nothing newer anywhere, and a shed has nothing placed to shed
    const collected = await run(li, "collect_from_peers", "banks=minions/mine,minions/data");
    for (const n of NODES.filter((x) => x !== leader)) assert.deepEqual([collected[n].items, collected[n].errors], [0, []], `collect from ${n}: ${JSON.stringify(collected[n])}`);
    const notPlaced = await run(li, "shed_unowned", "minions", "banks=minions/mine");
    assert.equal(notPlaced.status, "skipped");
    assert.match(notPlaced.reason, /routed to no ring \(broadcast/);
    // placed again (the first placement scan), for the rest of the test: each record back on its two owners only
    for (const dt of ["mine", "grains"]) await run(li, "route_set", dt, "minions");
    for (const dt of ["mine", "grains"]) {
      const r = await placed(li, dt);
      for (const id of IDS) assert.equal(r.ids[id].length, 2, `${dt} of ${id} on two masters again`);
    }
    // nothing to shed once placed (the scan dropped every copy not owned), and no copy would go unconfirmed
    const sheds = await run(li, "shed_unowned_all", "minions", "banks=minions/mine,minions/data", "dry_run=True");
    for (const n of NODES) assert.deepEqual([sheds[n].status, sheds[n].dropped, sheds[n].kept_sole_copy], ["ok", 0, 0], `shed on ${n}: ${JSON.stringify(sheds[n])}`);

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
