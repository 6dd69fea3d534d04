/**
 * A job published on one master of a cluster is sealed and signed once in the cluster (issue 17): three real master
 * processes (127.0.0.26-28 behind HAProxy on 127.0.0.25), an in-repo minion signed in on each master directly, and,
 * when Salt's source is here, a real 3007 minion on m2 and a real 3006.8 minion on m3, both checking the publish
 * signature (`sign_pub_messages: True` on the minion). Jobs published on m1 are answered by every minion (so the
 * peers' minions took the frame m1 sealed), and each master's `brine_publisher_total` shows one signature per
 * job in the whole cluster: m1 signed every job, m2 and m3 none, and sent m1's frames as they came.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { ClusterHarness, minionThrough, clusterPrerequisites, until, PUB_PORT, RET_PORT } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.25";
const HOSTS = ["127.0.0.26", "127.0.0.27", "127.0.0.28"];
/** each master's metrics endpoint, on its own address */
const METRICS_PORT = 9108;
const JOBS = 20;
const WHAT = ["sealed", "signed", "passed", "refused", "dropped"] as const;

async function publisherTotals(host: string): Promise<Record<(typeof WHAT)[number], number>> {
  const text = await (await fetch(`http://${host}:${METRICS_PORT}/metrics`)).text();
  const out = { sealed: 0, signed: 0, passed: 0, refused: 0, dropped: 0 };
  for (const w of WHAT) {
    const m = new RegExp(`^brine_publisher_total\\{what="${w}"\\} (\\d+)$`, "m").exec(text);
    assert.ok(m, `brine_publisher_total{what="${w}"} is served by ${host}`);
    out[w] = Number(m[1]);
  }
  return out;
}

test("a job published on one master is signed once in the cluster, and the minions of every master (real 3007 and 3006.8 ones too) take it", { timeout: 600_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const realSkip = realSaltSkipReason(["3007.x", "v3006.8"]);
  if (realSkip) t.diagnostic(`real minions left out: ${realSkip}`);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-pubsign", privateCachedir: true, perMaster: (m) => ({ brine_metrics: { host: m.host, port: METRICS_PORT } }) });
  const minions: TestMinion[] = [];
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-ps-"));
  try {
    await h.waitLeader([0, 1, 2], 3, 60_000);
    const keys = await testKeys(HOSTS.length);
    HOSTS.forEach((host, i) => minions.push(minionThrough(host, `ps-t${i + 1}`, keys[i]!)));
    await Promise.all(minions.map((m) => m.start()));
    const ids = minions.map((m) => m.id);
    if (!realSkip) {
      // each on a peer of the publishing master, checking the signature of every publish
      await Promise.all([
        startRealMinion(runDir, "ps-r7", RET_PORT, PUB_PORT, "3007.x", "sign_pub_messages: True", HOSTS[1]),
        startRealMinion(runDir, "ps-r6", RET_PORT, PUB_PORT, "v3006.8", "sign_pub_messages: True", HOSTS[2]),
      ]);
      ids.push("ps-r7", "ps-r6");
    }
    const client = new LocalClient(loadMasterConfig(h.masters[0]!.confDir));
    const answers = async (arg: string): Promise<Map<string, unknown>> => {
      const got = new Map<string, unknown>();
      for await (const r of client.cmdIter({ tgt: "ps-*", fun: "test.echo", arg: [arg], timeoutS: 30 })) if (!("missing" in r)) got.set(r.id, r.data.return);
      return got;
    };
    await until("every minion to answer a job published on m1", async () => ((await answers("ready")).size === ids.length ? true : undefined), 120_000, 1000);

    // the metrics are sampled every second: settled when two scrapes a second apart agree
    const settled = async () =>
      until("the publisher figures to settle", async () => {
        const a = await Promise.all(HOSTS.map(publisherTotals));
        await new Promise((r) => setTimeout(r, 1500));
        const b = await Promise.all(HOSTS.map(publisherTotals));
        return JSON.stringify(a) === JSON.stringify(b) ? b : undefined;
      }, 30_000, 0);
    const before = await settled();
    for (let j = 0; j < JOBS; j++) {
      const got = await answers(`job-${j}`);
      assert.deepEqual([...got.keys()].sort(), [...ids].sort(), `job ${j}: every minion of every master answered`);
      for (const [id, ret] of got) assert.equal(ret, `job-${j}`, `${id}'s return of job ${j}`);
    }
    const after = await settled();
    const d = after.map((a, i) => Object.fromEntries(WHAT.map((w) => [w, a[w] - before[i]![w]])) as Record<(typeof WHAT)[number], number>);
    assert.equal(d.reduce((s, x) => s + x.signed, 0), JOBS, `one signature per job in the cluster: ${JSON.stringify(d)}`);
    assert.deepEqual(d[0], { sealed: JOBS, signed: JOBS, passed: 0, refused: 0, dropped: 0 }, "the origin sealed and signed each job");
    for (const i of [1, 2]) assert.deepEqual(d[i], { sealed: 0, signed: 0, passed: JOBS, refused: 0, dropped: 0 }, `m${i + 1} sent the origin's frames as they came`);
  } finally {
    stopRealMinions(runDir);
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop();
  }
});
