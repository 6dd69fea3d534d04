/**
 * The reactor's costs and bounds: the main thread reads a bus frame's tag without decoding it and posts only
 * frames whose tag a reactor glob names (a return pays nothing); the bounded queue drops past
 * reactor_worker_hwm with a log line and a counter, end to end and deterministically.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { packEvent } from "../../src/shared/event-frame.js";
import { tagOfFrame } from "../../src/main-thread/automation-host.js";
import { BoundedQueue } from "../../src/automation/queue.js";
import { controlCall } from "../../src/lib/client/control-client.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

test("the tag of a bus frame is read from its first bytes, for every bin size and a multi-byte tag", () => {
  for (const size of [0, 10, 300, 70_000]) {
    const tag = `salt/job/20261125131841823000/ret/m-${"é".repeat(3)}`;
    assert.equal(tagOfFrame(packEvent(tag, { pad: "x".repeat(size) })), tag);
  }
  assert.equal(tagOfFrame(Buffer.from("not a frame")), undefined);
  assert.equal(tagOfFrame(packEvent("t".repeat(2000), {})), undefined, "an over-long tag is not looked at");
});

test("the bounded queue runs `concurrency` tasks, keeps `hwm` waiting and drops the rest, counting them", async () => {
  const release: (() => void)[] = [];
  const drops: number[] = [];
  const q = new BoundedQueue<number>(2, 3, (n) => new Promise<void>((r) => release.push(() => r())), (_n, count) => drops.push(count));
  for (let i = 0; i < 10; i++) q.push(i);
  assert.equal(q.running, 2);
  assert.equal(q.length, 3);
  assert.equal(q.dropped, 5);
  assert.deepEqual(drops, [1, 2, 3, 4, 5]);
  while (release.length) {
    release.shift()!();
    await new Promise((r) => setImmediate(r));
  }
  assert.equal(q.done, 5);
  assert.equal(q.running, 0);
});

test("events whose tag no reactor names never reach the reactor thread; past reactor_worker_hwm events are dropped and logged", { timeout: 90_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-reactq-"));
  mkdirSync(path.join(root, "reactor"), { recursive: true });
  const sls = path.join(root, "reactor", "ping.sls");
  writeFileSync(sls, `ping:\n  local.test.ping:\n    - tgt: {{ data['id'] }}\n`);
  const logFile = path.join(root, "master.log");
  const tm = await startTestMaster({ auto_accept: true, reactor: [{ "flood/*": [sls] }], reactor_worker_threads: 1, reactor_worker_hwm: 1 } as never, root, { logFile });
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "flood-1", k!);
  try {
    await m.start();
    const stats = async () => (await controlCall(tm.sockDir, { op: "automation", req: { op: "reactor.stats" } })).ret as Record<string, number>;
    await Promise.all(Array.from({ length: 100 }, (_, i) => m.fireEvent(`other/tag/${i}`, { i })));
    await m.fireEvent("flood/one", {});
    for (let t = 0; t < 100 && (await stats()).done < 1; t++) await new Promise((r) => setTimeout(r, 50));
    const s1 = await stats();
    assert.equal(s1.received, 1, "only the event a glob names crossed to the reactor thread");
    assert.equal(s1.dropped, 0);

    await Promise.all(Array.from({ length: 60 }, (_, i) => m.fireEvent(`flood/${i}`, { i })));
    for (let t = 0; t < 200 && (await stats()).received < 61; t++) await new Promise((r) => setTimeout(r, 50));
    const s2 = await stats();
    assert.equal(s2.received, 61);
    assert.ok(s2.dropped > 0, `some of 60 events at once were dropped with hwm 1 (${JSON.stringify(s2)})`);
    assert.ok(s2.dropped <= 59);
    assert.match(readFileSync(logFile, "utf8"), /Reactor queue is full \(reactor_worker_hwm 1\): event flood\/\d+ dropped/);
  } finally {
    await m.stop();
    await tm.stop();
  }
});
