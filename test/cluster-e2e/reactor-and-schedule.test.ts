/**
 * The reactor and the master schedule in a cluster of three masters behind HAProxy (issue #19, beyond Salt: Salt
 * fires each reaction and each scheduled job once per master). Every master sees every event (peers forward
 * them), and only the owner of the event among live masters (ring preference order, src/automation/owner.ts)
 * reacts: ten events give ten reactions cluster-wide, none twice. After one master is killed, the next ten events
 * still give ten reactions, from the two left. A job every 2 s runs on one master only (the owner of its name),
 * and goes on after the kill.
 * Counted from the masters' log files ("Reactor '<id>' ... started", "Running scheduled job: ...").
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.60";
const HOSTS = ["127.0.0.61", "127.0.0.62", "127.0.0.63"];

test("clustered: each event reacts once on one master, also after a master dies; a scheduled job runs on one master", { timeout: 300_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const reactorDir = path.join(process.env.TMPDIR ?? "/tmp", `brine-cl-react-${process.pid}`);
  mkdirSync(reactorDir, { recursive: true });
  const sls = path.join(reactorDir, "react.sls");
  writeFileSync(sls, `react_{{ tag | replace('/', '_') }}:\n  runner.test.arg:\n    - args:\n      - tag: {{ tag }}\n`);
  const h = await ClusterHarness.start({
    lbHost: LB,
    hosts: HOSTS,
    clusterId: "brine-reactor",
    extra: { reactor: [{ "react/*": [sls] }], schedule: { tick: { function: "test.arg", seconds: 2, args: ["tick"], maxrunning: 20 } } },
  });
  const minions: TestMinion[] = [];
  const logOf = (i: number) => (existsSync(h.masters[i]!.logFile) ? readFileSync(h.masters[i]!.logFile, "utf8") : "");
  const reactions = (tagPrefix: string) =>
    h.masters.map((_, i) => [...logOf(i).matchAll(/Reactor 'react_(react_[\w]+)': runner 'test\.arg' started/g)].map((m) => m[1]!).filter((x) => x.startsWith(tagPrefix)));
  try {
    await h.waitLeader([0, 1, 2], 3);
    const [k] = await testKeys(1);
    const m = minionThrough(LB, "cl-react-1", k!);
    minions.push(m);
    await m.start();

    for (let i = 0; i < 10; i++) await m.fireEvent(`react/a${i}`, { i });
    await until("ten reactions", async () => (reactions("react_a").flat().length >= 10 ? true : undefined), 60_000, 500);
    await sleep(3000); // a duplicate would show up by now
    const a = reactions("react_a");
    assert.equal(a.flat().length, 10, `each event reacted once: ${JSON.stringify(a)}`);
    assert.equal(new Set(a.flat()).size, 10);

    const ticks = h.masters.map((_, i) => (logOf(i).match(/Running scheduled job: tick /g) ?? []).length);
    assert.equal(ticks.filter((n) => n > 0).length, 1, `the scheduled job ran on one master only: ${JSON.stringify(ticks)}`);

    // kill master 3 (whatever it owned goes to the next live master in the ring's order)
    h.kill(2);
    await h.waitExit(2);
    await sleep(2000);
    for (let i = 0; i < 10; i++) await m.fireEvent(`react/b${i}`, { i });
    await until("ten more reactions", async () => (reactions("react_b").flat().length >= 10 ? true : undefined), 60_000, 500);
    await sleep(3000);
    const b = reactions("react_b");
    assert.equal(b.flat().length, 10, `each event reacted once with a master down: ${JSON.stringify(b)}`);
    assert.equal(b[2]!.length, 0);
    // the scheduled job goes on, on one of the two left
    const before = [0, 1].map((i) => (logOf(i).match(/Running scheduled job: tick /g) ?? []).length);
    await sleep(8000);
    const after = [0, 1].map((i) => (logOf(i).match(/Running scheduled job: tick /g) ?? []).length);
    assert.ok(after[0]! + after[1]! > before[0]! + before[1]!, `the job still runs with a master down: ${JSON.stringify({ before, after })}`);
  } finally {
    await Promise.all(minions.map((x) => x.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
