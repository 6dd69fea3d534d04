/**
 * "[Not connected]" across masters (issue #6). Behind HAProxy every publish connection comes from the
 * balancer's address, so a clustered master judges presence by who was heard from lately (any master's
 * returns reach every job cache; data cache writes reach every master) united with its peers' reports
 * (src/workers/req-handler/presence.ts). Two minions attached to master 2: one stops answering test.ping but still answers
 * the CLI's saltutil.find_job, the other is stopped. On master 1 the first is "[No response]", the second
 * "[Not connected]".
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { PublishLoad } from "../../src/lib/minion/functions.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.130";
const HOSTS = ["127.0.0.131", "127.0.0.132", "127.0.0.133"];
/** brine_presence_heard_s for this cluster: short, so a stopped minion ages out quickly */
const HEARD_S = 6;

test("a minion attached to master 2 that stops returning is [No response] on master 1, a stopped one [Not connected]", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-presence", extra: { brine_presence_heard_s: HEARD_S } });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(2);
    await h.only(1);
    const hung = minionThrough(LB, "pr-hung", keys[0]!);
    const gone = minionThrough(LB, "pr-gone", keys[1]!);
    minions.push(hung, gone);
    await Promise.all(minions.map((m) => m.start()));
    const servers = await h.haproxyServers();
    assert.ok(servers.filter((s) => s.server !== "m2").every((s) => s.scur === 0), `both minions are attached to master 2: ${JSON.stringify(servers)}`);
    await h.undrain(0);
    await h.undrain(2);

    // polled once a second: through the control socket, not a salt-run process per poll
    const present = async (i: number) => (await h.controlRunner(i, "manage.present")) as string[];
    assert.deepEqual((await present(0)).sort(), ["pr-gone", "pr-hung"], "master 1 counts master 2's minions as present");

    // pr-hung never finishes test.ping (and does not list it as running); it still answers find_job
    const run = hung.runner.run.bind(hung.runner);
    (hung.runner as { run: (l: PublishLoad) => ReturnType<typeof run> }).run = (load) => (load.fun === "test.ping" ? new Promise(() => undefined) : run(load));
    await gone.stop();
    await until("master 1 to stop counting the stopped minion as present", async () => (!(await present(0)).includes("pr-gone") ? true : undefined), 60_000, 1000);

    const r = await h.salt(0, ["-L", "pr-hung,pr-gone", "test.ping", "-t", "3", "--gather-job-timeout", "3", "--out", "json"]);
    const rets = parseReturns(r.stdout);
    assert.match(String(rets["pr-hung"]), /\[No response\]/, r.stdout);
    assert.match(String(rets["pr-gone"]), /\[Not connected\]/, r.stdout);
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
